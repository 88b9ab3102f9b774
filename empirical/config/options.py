"""A command's options, declared once: an options class whose fields carry the name, the type
with its check, the default and the help. The command's parser is built from it, the library
function takes it, and `python -m empirical` parses it before the command's module (and torch)
is imported.

    @options_class("attribute", "Attribute a window's loss and score changes to parameter groups.")
    class AttributeOptions:
        run_dir: str = arg(help="a run directory", positional=True)
        window: tuple[Window, ...] = arg(help="steps A:B (repeat for several)", repeat=True)
        nodes: integer(1, wording=MUST) = arg(8, help="Gauss-Legendre points per segment")
        first_order_only: Flag = arg(False, help="the ends only")

    opts = parse_options(AttributeOptions, ["RUN", "--window", "1:2"])

A bad value is one UsageError naming the flag, the value and what is allowed (`--nodes 0: must
be an integer >= 1`); `--help` shows each default once, from the field. A field without `arg`
is the library's alone (not on the command line). An options class may define `check(self)`,
run after the fields are checked and before any work: what needs the file system (a run
directory exists, an output directory can be made) or several fields together. A help that
needs an import the command line must not pay for (torch) is a function, called only for
`--help`.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from disentangled.command_line import OneLineParser, run_main
from disentangled.errors import UsageError
from empirical.config.field_types import CHECK
from empirical.config.io import checked_dataclass, command_line_value

__all__ = [
    "Arg", "arg", "build_parser", "command_argv", "command_main", "flag_of",
    "options_class",
    "parse_options",
]

T = TypeVar("T")
REQUIRED = dataclasses.MISSING


@dataclass(frozen=True)
class Arg:
    """How a field appears on the command line (see `arg`)."""

    help: str | Callable[[], str]
    flag: str | None = None
    positional: bool = False
    nargs: str | None = None
    repeat: bool = False
    metavar: str | None = None
    raw: bool = False
    default_text: str | None = None


def arg(default: Any = REQUIRED, *, help: str | Callable[[], str], flag: str | None = None,
        positional: bool = False,
        nargs: str | None = None, repeat: bool = False, metavar: str | None = None,
        raw: bool = False, default_text: str | None = None) -> Any:  # fmt: skip
    """A field of an options class on the command line: `--field-name VALUE` (or `flag`); a
    bool field is a switch (`--name`, or `--no-name` for one that defaults to true);
    `positional` an argument without a flag; `nargs` ("*", "+") a list given as words;
    `repeat` a flag given once per item; `raw` hands the text to the field's check unread
    (else it reads as an override's value: a number, a list `a,b`, ...); `default_text`
    what the help says of the default (default: the default itself); `help` a function: the
    text, made only when `--help` asks for it."""
    cli = Arg(help, flag, positional, nargs, repeat, metavar, raw, default_text)
    return dataclasses.field(default=default, metadata={"cli": cli})


def options_class(prog: str, description: str,
                  field_hint: Callable[[str], str | None] | None = None,
                  intermixed: bool = False):  # fmt: skip
    """Decorator: the options of `python -m empirical {prog}`, a pydantic dataclass checked on
    construction (a bad value is a UsageError naming its flag); `field_hint` names the config
    field an unknown flag may mean (for a command that takes config overrides); `intermixed`:
    positional words may come after flags too (`SRC --out DIR key=value`)."""

    def wrap(cls: type[T]) -> type[T]:
        cls = checked_dataclass(cls, lambda exc, c: UsageError(explain(exc, c)), kw_only=True)
        cls.__prog__, cls.__description__, cls.__field_hint__ = prog, description, field_hint
        cls.__intermixed__ = intermixed
        return cls

    return wrap


@dataclass(frozen=True)
class _Field:
    """An options field with its resolved type (its annotation may be a string)."""

    name: str
    type: Any
    default: Any


def _cli_fields(cls: type) -> list[tuple[_Field, Arg]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return [
        (_Field(f.name, hints[f.name], f.default), f.metadata["cli"])
        for f in dataclasses.fields(cls)
        if "cli" in f.metadata
    ]


def flag_of(cls: type, name: str) -> str:
    """How field `name` is written on the command line: `--eval-size`, `RUN_DIR`."""
    for f, a in _cli_fields(cls):
        if f.name == name:
            if a.positional:
                return a.metavar or name.upper()
            return a.flag or _default_flag(f)
    return name


def _default_flag(f: _Field) -> str:
    name = f.name.replace("_", "-")
    return f"--no-{name}" if _is_switch(f) and f.default is True else f"--{name}"


def _base(tp: Any) -> Any:
    """The type under Annotated[...] and Optional[...]."""
    while True:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            tp = args[0]
        elif origin in (typing.Union, types.UnionType) and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _is_switch(f: _Field) -> bool:
    return _base(f.type) is bool


def _choices(tp: Any) -> tuple[str, ...] | None:
    """The allowed values of a `choice(...)` field (None: not one)."""
    for meta in getattr(tp, "__metadata__", ()):
        allowed = getattr(getattr(meta, "func", None), "allowed", None)
        if allowed is not None:
            return tuple(allowed)
    return None


def _item_type(tp: Any) -> Any:
    args = typing.get_args(_base(tp))
    return args[0] if args else str


def _help(f: _Field, a: Arg, helping: bool) -> str:
    text = a.help if isinstance(a.help, str) else a.help() if helping else ""
    if a.default_text is not None:
        return f"{text} (default {a.default_text})" if a.default_text else text
    default = f.default
    if default is REQUIRED or default is None or _is_switch(f) or default == ():
        return text
    if isinstance(default, (list, tuple)):
        default = ",".join(str(v) for v in default)
    return f"{text} (default {default})"


def build_parser(cls: type, helping: bool = True) -> OneLineParser:
    """The command line of options class `cls`: one argument per `arg` field, in field order;
    a flag left out keeps the field's default (argparse.SUPPRESS). `helping` False: the helps
    that are functions are not made (the command line asks for no --help)."""
    ap = OneLineParser(prog=f"python -m empirical {cls.__prog__}", description=cls.__description__)
    hint = cls.__field_hint__
    if hint is not None:
        ap.field_hint = hint
    for f, a in _cli_fields(cls):
        kwargs: dict[str, Any] = {"help": _help(f, a, helping), "default": argparse.SUPPRESS}
        choices = _choices(f.type)
        kwargs["metavar"] = a.metavar or ("{" + ",".join(choices) + "}" if choices else None)
        if a.positional:
            kwargs["metavar"] = kwargs["metavar"] or f.name.upper()
            nargs = a.nargs or (None if f.default is REQUIRED else "?")
            ap.add_argument(f.name, nargs=nargs, **kwargs)
            continue
        flag = a.flag or _default_flag(f)
        if _is_switch(f):
            action = "store_false" if f.default is True else "store_true"
            del kwargs["metavar"]
            ap.add_argument(flag, dest=f.name, action=action, **kwargs)
        else:
            if kwargs["metavar"] is None:
                del kwargs["metavar"]
            if a.repeat:
                kwargs["action"] = "append"
            elif a.nargs:
                kwargs["nargs"] = a.nargs
            ap.add_argument(flag, dest=f.name, required=f.default is REQUIRED, **kwargs)
    return ap


def _value(f: _Field, a: Arg, given: Any) -> Any:
    """A parsed argument as the field's check takes it."""
    if _is_switch(f) or a.raw:
        return given
    if isinstance(given, list):  # words (nargs) or repeats
        item = _item_type(f.type)
        return [command_line_value(text, item) for text in given]
    return command_line_value(given, f.type)


def parse_options(cls: type[T], argv: list[str]) -> T:
    """`argv` as options class `cls`: every field checked, then `check()` if it has one."""
    ap = build_parser(cls, helping=any(a in ("-h", "--help") for a in argv))
    ns = vars(ap.parse_intermixed_args(argv) if cls.__intermixed__ else ap.parse_args(argv))
    fields = {f.name: (f, a) for f, a in _cli_fields(cls)}
    values = {name: _value(*fields[name], given) for name, given in ns.items() if name in fields}
    opts = cls(**values)
    object.__setattr__(opts, "_argv", tuple(argv))  # a command's own command line (command_argv)
    check = getattr(opts, "check", None)
    if check is not None:
        check()
    return opts


def command_argv(opts: Any) -> tuple[str, ...] | None:
    """The words `opts` was parsed from by `parse_options`, as given (a sweep records its
    command line); None for options made otherwise."""
    return getattr(opts, "_argv", None)


# -- a bad value, in one line naming its flag ---------------------------------------------------
_PREFIXES = ("is out of range: ", "is not allowed: ", ": ")


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def explain(exc: ValidationError, cls: type) -> str:
    """A ValidationError of options class `cls` as `--flag VALUE: what is allowed`."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    name = str(loc[0]) if loc else cls.__name__
    flag = flag_of(cls, name)
    value, ctx = err.get("input"), err.get("ctx") or {}
    if err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        return f"unknown option {name!r}"
    if err["type"] == "missing":
        return f"{flag} is required"
    if err["type"] == CHECK:
        message = ctx["message"]
        for prefix in _PREFIXES:
            message = message.removeprefix(prefix)
    elif ctx.get("error") is not None:
        message = str(ctx["error"])
    else:
        message = err["msg"]
    return f"{flag} {_shown(value)}: {message}"


def command_main(cls: type[T], run: Callable[[T], int | None]) -> Callable[..., int]:
    """A command module's `main(argv=None) -> exit status`: `argv` parsed as options class
    `cls`, then `run(options)`, under the error contract (for calling a command from Python or
    a test; `python -m empirical` does the same through its dispatcher)."""

    def main(argv: list[str] | None = None) -> int:
        return run_main(lambda args: run(parse_options(cls, args)), argv)

    return main

