"""Command-line flags from a config dataclass: one flag per field, with the field's help text, its
default and its choices (nanochat-style: the dataclass is the one place a setting is defined).

    @dataclass
    class Config:
        lr: float = setting(0.02, "learning rate")
        kind: str = setting("muon", "optimizer", choices=("muon", "adamw"))

A field's flag is --field-name. Booleans get --x / --no-x; tuples take several values (strings
also comma-separated); fields of type `X | None` accept the word None. Choices are listed in the
help; the config's own validation refuses others (so a choice registered later, e.g. an encoding
defined in a test, is accepted).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import typing

from .runs.printable import printable

NEWLINE = "\n"  # kept in a printed error: a plan's failures are one line each


def setting(default, help: str, choices=None, metavar=None):
    """A dataclass field with a help text (and optional choices) for its command-line flag."""
    meta = {"help": help, "choices": choices, "metavar": metavar}
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


def check_choices(config) -> None:
    """Raise ValueError for a field of dataclass `config` whose value is not one of its setting's
    choices, naming the flag and the nearest choices."""
    for f in dataclasses.fields(config):
        choices = f.metadata.get("choices")
        choices = choices() if callable(choices) else choices
        value = getattr(config, f.name)
        values = value if isinstance(value, (tuple, list)) else (value,)
        for v in values:
            if choices and v not in choices:
                raise ValueError(f"{flag(f.name)}: " + unknown("value", v, choices))


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
