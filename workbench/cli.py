"""Command-line flags from a config dataclass: one flag per field, with the field's help text, its
default and its choices (nanochat-style: the dataclass is the one place a setting is defined).

    @dataclass
    class Config:
        lr: float = setting(0.02, "learning rate", above=0)
        steps: int = setting(100, "optimizer steps", low=1)
        kind: str = setting("muon", "optimizer", choices=("muon", "adamw"))
        endgame: str = setting("fixed", "...", choices=choices_of("training.curriculum", "ENDGAMES"))

        def __post_init__(self):
            check_settings(self)      # every field within its choices and bounds, or one line why not

A field's flag is --field-name. Booleans get --x / --no-x; tuples take several values (strings
also comma-separated); fields of type `X | None` accept the word None. Choices are listed in the
help and may be a callable, read when asked (a registry's names, or `choices_of` a module that is
imported only then); `check_settings` refuses other values (so a choice registered later, e.g. an
encoding defined in a test, is accepted) and values outside the bounds: `low`/`high` inclusive,
`above`/`below` exclusive; an int field must hold an integer, a float field a number.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import importlib
import json
import math
import os
import re
import typing

from .runs.printable import printable

NEWLINE = "\n"  # kept in a printed error: a plan's failures are one line each


BOUNDS = ("low", "high", "above", "below")


def setting(default, help: str, choices=None, metavar=None, low=None, high=None, above=None, below=None):
    """A dataclass field with a help text for its command-line flag and what it may take: `choices`
    (or a callable that gives them), and bounds: `low` <= value <= `high`, `above` < value < `below`
    (`check_settings` refuses the rest)."""
    meta = {"help": help, "choices": choices, "metavar": metavar, **dict(zip(BOUNDS, (low, high, above, below)))}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parser_of(hint):
    """(argparse type, nargs) for a field's type hint."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = type(None) in typing.get_args(hint)
    base = args[0] if optional and len(args) == 1 else hint
    if typing.get_origin(base) is tuple:  # several values (or the one word None, if optional)
        inner = [a for a in typing.get_args(base) if a is not Ellipsis]
        fixed = Ellipsis not in typing.get_args(base) and not optional
        return _scalar(inner[0], optional), (len(inner) if fixed else "+")
    return _scalar(base, optional), None


def _scalar(kind, optional):
    def parse(text):
        if optional and text == "None":
            return None
        if kind is str and "," in text:  # "--tasks addition,division" as well as "--tasks addition division"
            return text
        return kind(text)

    parse.__name__ = getattr(kind, "__name__", str(kind))  # argparse names the type in its errors
    return parse


def add_arguments(parser: argparse.ArgumentParser, cls, defaults, skip=()) -> None:
    """One flag per field of dataclass `cls` (those with help metadata, minus `skip`), defaults
    taken from the instance `defaults`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or "help" not in f.metadata:
            continue
        default, meta = getattr(defaults, f.name), f.metadata
        text = meta["help"].replace("%", "%%")  # argparse formats help with %
        if hints[f.name] is bool:
            parser.add_argument(flag(f.name), action=argparse.BooleanOptionalAction, default=default, help=text)
            continue
        kind, nargs = _parser_of(hints[f.name])
        choices = meta["choices"]() if callable(meta["choices"]) else meta["choices"]
        parser.add_argument(
            flag(f.name),
            type=kind,
            nargs=nargs,
            default=default,
            metavar=meta["metavar"],
            help=text + (f" (choices: {', '.join(map(str, choices))})" if choices else ""),
        )


def values_of(args: dict, cls, skip=()) -> dict:
    """The parsed values that belong to the fields of dataclass `cls` (tuples for tuple fields)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name not in args:
            continue
        value = args[f.name]
        if isinstance(value, list):
            value = (
                None
                if value == [None]
                else tuple(part for v in value for part in (v.split(",") if isinstance(v, str) else [v]) if part != "")
            )
        out[f.name] = value
    return out


def add_encoding_option(parser: argparse.ArgumentParser) -> None:
    """--encoding-option KEY=VALUE (repeatable), as every command that takes an encoding reads it
    (`encoding_options` parses the pairs)."""
    parser.add_argument(
        "--encoding-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the encoding (repeatable)",
    )


def key_values(pairs: list[str], flag: str, names=None) -> dict:
    """KEY=VALUE pairs of `flag`: each VALUE as JSON reads it (numbers, true/false, "x"), else the
    string itself. With `names`, a KEY outside them is refused too."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, got {pair!r}")
        if names is not None and key not in names:
            raise ValueError(f"{flag}: " + unknown("key", key, sorted(names)))
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def encoding_options(pairs: list[str]) -> dict:
    """--encoding-option KEY=VALUE pairs: numbers and true/false as JSON reads them, else strings."""
    return key_values(pairs, "--encoding-option")


def unknown(kind: str, value, options) -> str:
    """ "unknown encoding 'bittoken'; did you mean 'bittokens'? (choices: ...)": the message for a
    name that is not one of `options`, with the nearest ones first."""
    options = [str(o) for o in options]
    close = difflib.get_close_matches(str(value), options, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    return f"unknown {kind} {value!r}{hint} (choices: {', '.join(options)})"


def choices_of(module: str, name: str):
    """A setting's choices kept by the module that acts on them (`name` of workbench.`module`), read
    when asked: the settings name them without importing that module."""

    def read():
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)

    read.__qualname__ = f"choices_of({module!r}, {name!r})"
    return read


def check_settings(config, bounds: dict | None = None) -> None:
    """Raise ValueError, in one line naming the flag and the value, for a field of dataclass
    `config` that its setting does not allow: a value not among its choices (the nearest named) or
    outside its bounds. `bounds` gives some fields other bounds ({name: {"low": 0, "below": 1}}):
    a configuration that reuses a group of settings and bounds one of them tighter."""
    for name, choices, limits, hint in _settings_of(type(config)):
        value = getattr(config, name)
        choices = choices() if callable(choices) else choices
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if choices and v not in choices:
                raise ValueError(f"{flag(name)}: " + unknown("value", v, choices))
        if bounds and name in bounds:
            limits = limits | bounds[name]
        if any(limit is not None for limit in limits.values()):
            _check_bounds(name, value, hint, **limits)


@functools.cache
def _settings_of(cls) -> tuple:
    """(name, choices, {bound: limit}, type hint) of each setting of dataclass `cls`, read once per
    class: a study's plan checks thousands of configurations."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, f.metadata["choices"], {key: f.metadata.get(key) for key in BOUNDS}, hints[f.name])
        for f in dataclasses.fields(cls)
        if "help" in f.metadata
    )


def _check_bounds(name: str, value, hint, low=None, high=None, above=None, below=None) -> None:
    """Raise ValueError unless `value` is within the bounds (None passes where the field's type
    allows it): an integer (no bool) for an int field, a number for a float field, finite where
    only a lower bound is given."""
    if value is None and type(None) in typing.get_args(hint):
        return
    within = _within(value, low, high, above, below)
    if int in (hint, *typing.get_args(hint)):
        if not isinstance(value, int) or isinstance(value, bool) or not within:
            span = f"in {low}..{high}" if high is not None else f">= {low}"
            raise ValueError(f"{flag(name)} must be an integer {span}, got {value!r}")
    elif above == 0 and low is None and high is None and below is None:
        if not within:
            raise ValueError(f"{flag(name)} must be positive, got {value}")
    elif high is None and below is None:
        if not within or not math.isfinite(value):
            raise ValueError(f"{flag(name)} must be a finite number >= {low}, got {value}")
    elif not within:
        interval = f"{'[' if low is not None else '('}{low if low is not None else above}, "
        interval += f"{high if high is not None else below}{']' if high is not None else ')'}"
        raise ValueError(f"{flag(name)} must be in {interval}, got {value}")


def _within(value, low, high, above, below) -> bool:
    """`value` is a number (a bool counts, as Python's comparisons take it) inside the bounds."""
    return (
        isinstance(value, (int, float))
        and (low is None or value >= low)
        and (high is None or value <= high)
        and (above is None or value > above)
        and (below is None or value < below)
    )


class Parser(argparse.ArgumentParser):
    """argparse with errors in one line: what was wrong and where to look, not a usage dump."""

    def error(self, message):
        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if choice:  # argparse's own message, with the nearest choices named
            message = message[: message.index("invalid choice")] + unknown(
                "value", choice[1], re.findall(r"'([^']*)'", choice[2]) or choice[2].split(", ")
            )
        message = printable(message, keep="\n")  # a flag's value may hold what a terminal would act on
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists every option)\n")

    def fail(self, err: BaseException):
        """A user error raised while running: one line (a name read from a file in it shown
        escaped, `printable`); WORKBENCH_DEBUG=1 shows the traceback."""
        if os.environ.get("WORKBENCH_DEBUG"):
            raise err
        self.exit(2, f"{self.prog}: error: {printable(err, keep=NEWLINE)}\n")
