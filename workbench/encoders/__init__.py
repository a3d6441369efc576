"""Number encodings, one file each, behind one interface (`base.NumberEncoding`).

    >>> from workbench import encoders
    >>> encoders.names()
    ['bittokens', 'fone', 'xval', 'single_digit', 'triple_digit', ...]
    >>> encoders.label("single_digit")               # the display name in figures and tables
    'Single digit'
    >>> codec = encoders.get("bittokens", reciprocal=False)
    >>> head = codec.number_head(d_model=256)        # None for digit encodings
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from contextlib import contextmanager

from .base import NumberEncoding, NumberHead, TokenModule

_REGISTRY: dict[str, type[NumberEncoding]] = {}


def register(cls: type[NumberEncoding]) -> type[NumberEncoding]:
    """Class decorator: make an encoding available under `cls.name`."""
    if cls.name in _REGISTRY:
        raise ValueError(f"encoding {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


@contextmanager
def registered(cls: type[NumberEncoding]):
    """Register `cls` for the duration of a `with` block (an encoding defined in a test)."""
    register(cls)
    try:
        yield cls
    finally:
        del _REGISTRY[cls.name]


def names() -> list[str]:
    """Names of all registered encodings, in registration order."""
    return list(_REGISTRY)


def label(name: str) -> str:
    """The display name of encoding `name` in figures and tables (its class's `label`; a class
    without one, e.g. defined in a test, is shown by its registry name)."""
    return getattr(_class(name), "label", name)


def options(name: str) -> dict[str, object]:
    """The options `get(name, ...)` accepts, with their defaults."""
    params = inspect.signature(_class(name)).parameters.values()
    return {p.name: p.default for p in params if p.kind is p.POSITIONAL_OR_KEYWORD}


def get(name: str, **chosen) -> NumberEncoding:
    """Build the encoding `name` with the options `chosen` (see `options(name)`)."""
    accepted = options(name)
    unknown = sorted(set(chosen) - set(accepted))
    if unknown:
        raise ValueError(f"encoding {name!r} has no option(s) {unknown}; its options are {accepted}")
    return _class(name)(**chosen)


def _class(name: str) -> type[NumberEncoding]:
    try:
        return _REGISTRY[name]
    except KeyError:
        from ..cli import unknown
        raise ValueError(unknown("encoding", name, names())) from None


__all__ = ["NumberEncoding", "NumberHead", "TokenModule", "register", "registered", "names", "label", "options",
           "get"]

# Importing the modules registers them: the paper's five first (order = order of `names()`), then
# every other module of this folder, so that a new encoding is one new file and nothing else.
from . import bittokens, fone, xval, single_digit, triple_digit  # noqa: E402,F401,I001 (order = registry order)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
