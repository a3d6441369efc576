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

import ast
import functools
import importlib
import inspect
import pkgutil
from contextlib import contextmanager
from pathlib import Path

_REGISTRY: dict = {}  # name -> the NumberEncoding subclass
_loaded = False
# The paper's five first (order = order of `names()`), then every other module of this folder, so
# that a new encoding is one new file and nothing else.
_FIRST = ("bittokens", "fone", "xval", "single_digit", "triple_digit")


def _load() -> None:
    """Import the encodings' modules (torch with them), once: they register themselves. The
    registry then takes the order of an import of the folder from nothing (`_catalog_from_source`'s),
    whichever of its modules was imported first on its own; encodings defined elsewhere follow."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    modules = [f"{__name__}.{m}" for m in (*_FIRST, *sorted(m.name for m in pkgutil.iter_modules(__path__)))]
    for module in modules:
        importlib.import_module(module)
    try:
        canonical = [name for name, _, _ in _catalog_from_source()]
    except _Unreadable:  # a module the reader does not follow: by module, in _FIRST's and the folder's order
        canonical = [c.name for m in dict.fromkeys(modules) for c in _REGISTRY.values() if c.__module__ == m]
    rank = {name: k for k, name in enumerate(canonical)}
    ordered = sorted(_REGISTRY.items(), key=lambda item: rank.get(item[0], len(rank)))  # stable: the others after
    _REGISTRY.clear()
    _REGISTRY.update(ordered)


def __getattr__(name):
    """NumberEncoding, NumberHead, TokenModule and the encodings' modules, imported on first use."""
    _load()
    if name in ("NumberEncoding", "NumberHead", "TokenModule"):
        from . import base

        return getattr(base, name)
    if name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(cls):
    """Class decorator: make an encoding available under `cls.name`."""
    if not cls.__module__.startswith(f"{__name__}."):
        # An encoding defined elsewhere (a plugin, a test) comes after the workbench's own. One of
        # this folder's modules must not load the others: imported first on its own
        # (`from workbench.encoders.single_digit import SingleDigit`), it would import ntl.py,
        # which imports it back before its class exists.
        _load()
    if cls.name in _REGISTRY:
        raise ValueError(f"encoding {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


@contextmanager
def registered(cls):
    """Register `cls` for the duration of a `with` block (an encoding defined in a test)."""
    register(cls)
    try:
        yield cls
    finally:
        del _REGISTRY[cls.name]


def names() -> list[str]:
    """Names of all registered encodings, in registration order."""
    _load()
    return list(_REGISTRY)


def _read(from_source, from_registry):
    """`from_source(_catalog_from_source())` while the encodings' modules are not imported (no torch
    yet), else `from_registry()`; also the registry where the source reader cannot follow a module."""
    if not _loaded:
        try:
            return from_source(_catalog_from_source())
        except _Unreadable:  # a module written in a way the reader below does not follow
            pass
    return from_registry()


def catalog() -> dict[str, dict[str, object]]:
    """{name: its options with their defaults} of every encoding, as `names()` and `options()`
    give them, but without importing torch until an encoding is used: read from the source of
    this folder's modules (a command's --help lists them), or from the registry once loaded."""
    return _read(lambda found: {name: opts for name, opts, _ in found}, lambda: {n: options(n) for n in names()})


def known() -> list[str]:
    """`names()`, without importing torch until an encoding is used (read as `catalog` reads them).
    A setting's choices: every configuration built asks, so it reads names, never signatures."""
    return _read(lambda found: [name for name, _, _ in found], names)


ATTRIBUTES = ("single_token", "paper_label", "difficulty_base")  # the class attributes `described` reads without torch


def described(attribute: str) -> dict[str, object]:
    """{name: its class's `attribute`} (one of ATTRIBUTES), in the order of `names()`, without
    importing torch until an encoding is used (read as `catalog` reads the options)."""
    if attribute not in ATTRIBUTES:
        raise ValueError(f"described() reads {ATTRIBUTES}, not {attribute!r}")
    return _read(
        lambda found: {name: attributes[attribute] for name, _, attributes in found},
        lambda: {name: getattr(_class(name), attribute) for name in names()},
    )


def single_token() -> list[str]:
    """The encodings with one <|num|> token per number (`single_token`), in the order of `names()`."""
    return [name for name, single in described("single_token").items() if single]


def in_paper() -> list[str]:
    """The paper's encodings (a `paper_label`), in the order of `names()`."""
    return [name for name, label in described("paper_label").items() if label]


class _Unreadable(Exception):
    pass


@functools.cache
def _catalog_from_source() -> tuple:
    """What `_load` would register, in its order, read with `ast`: each `@register` class's
    (`name`, the keyword defaults of its or its nearest base's __init__, {attribute: value} of
    ATTRIBUTES as it or its nearest base sets them)."""
    folder = Path(__file__).parent
    trees = {m.name: ast.parse((folder / f"{m.name}.py").read_text()) for m in pkgutil.iter_modules(__path__)}
    done, found = set(), []

    def visit(module):
        if module in done:
            return
        done.add(module)
        for node in trees[module].body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                for target in [node.module] if node.module else [a.name for a in node.names]:
                    if target in trees:
                        visit(target)
            elif isinstance(node, ast.ClassDef) and any(
                isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list
            ):
                chain = lineage(node, module)
                found.append(
                    (
                        _attribute(node, "name"),
                        next(
                            _defaults(init, trees[m])
                            for c, m in chain
                            for init in c.body
                            if isinstance(init, ast.FunctionDef) and init.name == "__init__"
                        )
                        if any(_has(c, "__init__") for c, _ in chain)
                        else {},
                        {a: next(_attribute(c, a) for c, _ in chain if _has(c, a)) for a in ATTRIBUTES},
                    )
                )

    def class_of(name, module):
        """(the ClassDef named `name` as seen from `module`, its module)."""
        for node in trees[module].body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node, module
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in trees:
                if any((a.asname or a.name) == name for a in node.names):
                    return class_of(name, node.module)
        raise _Unreadable(name)

    def lineage(node, module):
        """[(the class, its module), its base, ..., NumberEncoding]: single inheritance only."""
        chain = [(node, module)]
        while node.bases:
            if len(node.bases) > 1 or not isinstance(node.bases[0], ast.Name):
                raise _Unreadable(node.name)
            node, module = class_of(node.bases[0].id, module)
            chain.append((node, module))
        if node.name != "NumberEncoding":
            raise _Unreadable(node.name)
        return chain

    for module in (*_FIRST, *sorted(trees)):
        visit(module)
    return tuple(found)


def _assigned(item, name: str) -> bool:
    targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(item, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)] == [name] and getattr(item, "value", None) is not None


def _has(node: ast.ClassDef, name: str) -> bool:
    return any(_assigned(item, name) or (isinstance(item, ast.FunctionDef) and item.name == name) for item in node.body)


def _attribute(node: ast.ClassDef, name: str):
    for item in node.body:
        if _assigned(item, name):
            try:
                return ast.literal_eval(item.value)
            except (ValueError, TypeError, SyntaxError):
                break
    raise _Unreadable(f"{node.name}.{name}")


def _defaults(init: ast.FunctionDef, tree: ast.Module) -> dict:
    """The keyword defaults of an __init__ (literals or the module's literal constants)."""
    args = init.args
    if args.posonlyargs or args.vararg or args.kwarg:
        raise _Unreadable(init.name)
    named = args.args[1:]
    if len(args.defaults) != len(named):
        raise _Unreadable("an option without a default")
    constants = {
        t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    out = {}
    for arg, default in zip(named, args.defaults):
        value = constants.get(default.id) if isinstance(default, ast.Name) else default
        try:
            out[arg.arg] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError):
            raise _Unreadable(arg.arg) from None
    return out


def label(name: str) -> str:
    """The display name of encoding `name` in figures and tables (its class's `label`; a class
    without one, e.g. defined in a test, is shown by its registry name)."""
    _load()
    return getattr(_class(name), "label", name)


def options(name: str) -> dict[str, object]:
    """The options `get(name, ...)` accepts, with their defaults."""
    _load()
    return dict(_signature_options(_class(name)))


@functools.cache
def _signature_options(cls) -> tuple:
    """(name, default) of the keyword options of `cls.__init__`: per class, since inspect.signature
    is slow and a study's plan builds thousands of configurations that each check their encoding."""
    params = inspect.signature(cls).parameters.values()
    return tuple((p.name, p.default) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)


def get(name: str, **chosen):
    """Build the encoding `name` with the options `chosen` (see `options(name)`)."""
    accepted = options(name)
    unknown = sorted(set(chosen) - set(accepted))
    if unknown:
        raise ValueError(f"encoding {name!r} has no option(s) {unknown}; its options are {accepted}")
    return _class(name)(**chosen)


def _class(name: str):
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        from ..cli import unknown

        raise ValueError(unknown("encoding", name, names())) from None


__all__ = [
    "NumberEncoding",
    "NumberHead",
    "TokenModule",
    "register",
    "registered",
    "names",
    "label",
    "options",
    "get",
    "catalog",
    "known",
    "described",
    "single_token",
    "in_paper",
]
