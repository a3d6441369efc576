"""Number encodings, one file each, behind one interface (`base.NumberEncoding`).

    >>> from workbench import encoders
    >>> encoders.names()
    ['bittokens', 'fone', 'xval', 'single_digit', 'triple_digit', ...]
    >>> codec = encoders.get("bittokens", d_model=256)
"""
from __future__ import annotations

from .base import NumberEncoding

_REGISTRY: dict[str, type[NumberEncoding]] = {}


def register(cls: type[NumberEncoding]) -> type[NumberEncoding]:
    """Class decorator: make an encoding available under `cls.name`."""
    if cls.name in _REGISTRY:
        raise ValueError(f"encoding {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """Names of all registered encodings, in registration order."""
    return list(_REGISTRY)


def get(name: str, d_model: int = 768, **options) -> NumberEncoding:
    """Build the encoding `name` for a model of width `d_model`."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown encoding {name!r}; choose one of {names()}") from None
    return cls(d_model=d_model, **options)


# Importing the modules registers them (order = order of `names()`).
from . import bittokens, fone, xval, single_digit, triple_digit  # noqa: E402,F401
