"""The field types config classes declare: checked by pydantic (v2) on construction, each
bad value answered in the project's words (empirical.config.io turns the error into one
`ConfigError` line naming the field: `task.p = 1 is out of range: must be an integer
[2, 4096]`).

    p: integer(2, 4096) = 97                          # "is out of range: must be an integer ..."
    steps: integer(1, wording=MUST) = 20_000           # "must be an integer >= 1"
    mix: choice("fractions", "rows") = "fractions"     # "is not allowed: must be one of ..."
    frac_1var: number(0, 1, message="must lie in [0, 1]") = 1 / 3
    r1: names("variable letters") = ("d",)           # a list, or "d,e" from the command line

A check raises a `PydanticCustomError` of type CHECK whose message follows
`{field} = {value!r} ` (COLON wording: `{field}: `). No torch at import.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

__all__ = [
    "CHECK", "COLON", "MUST", "RANGE", "Flag", "checked", "choice", "integer", "names", "number",
    "parsed", "positives", "text",
]  # fmt: skip

CHECK = "config_check"  # the pydantic error type of these checks
RANGE, MUST, COLON = "range", "must", "colon"  # "= v is out of range: ...", "= v must ...", ": ..."


def fail(message: str, colon: bool = False) -> PydanticCustomError:
    """The error of a check: `message` follows `{field} = {value!r} ` (one that starts with
    ":" follows `{field} = {value!r}`; colon: `{field}: `)."""
    return PydanticCustomError(CHECK, "{message}", {"message": message, "colon": colon})


def checked(base: type, check: Callable[[Any], Any]) -> Any:
    """`base`, checked (and normalised) by `check(value) -> value`, which raises `fail(...)`."""
    return Annotated[base, BeforeValidator(check)]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def integer(lo: int | None = None, hi: int | None = None, *, why: str = "",
            wording: str = RANGE, in_dots: bool = False) -> Any:  # fmt: skip
    """An integer in [lo, hi] (None: unbounded); never a bool or a float (3.0). wording
    RANGE: "is out of range: must be an integer [lo, hi]"; MUST: "must be an integer >= lo";
    COLON: "{field}: must be an integer >= lo, got v" (in_dots: "in lo..hi")."""
    if in_dots:
        rng = f" in {lo}..{hi}"
    elif lo is None or hi is None:
        rng = "" if lo is None and hi is None else f" >= {lo}" if hi is None else f" <= {hi}"
    else:
        rng = f" [{lo}, {hi}]"
    message = f"must be an integer{rng}{why}"
    if wording == RANGE:
        message = f"is out of range: {message}"

    def check(value):
        ok = _is_int(value) and (lo is None or value >= lo) and (hi is None or value <= hi)
        if not ok:
            if wording == COLON:
                raise fail(f"{message}, got {value!r}", colon=True)
            raise fail(message)
        return value

    return checked(int, check)


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False, finite: bool = True, message: str = "",
           type_message: str = "", wording: str = MUST) -> Any:  # fmt: skip
    """A number (int or float, never a bool or NaN) in the interval, returned as a float.
    message: what a value outside says (default "must be a number in [lo, hi]");
    type_message: what a value that is no number says (default: message); wording COLON:
    "{field}: {message}, got v"."""
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"
    message = message or f"must be a number in {left}{lo}, {hi}{right}"
    type_message = type_message or message

    def bad(text: str, value) -> PydanticCustomError:
        return fail(f"{text}, got {value!r}", colon=True) if wording == COLON else fail(text)

    def check(value):
        if not _is_number(value) or math.isnan(value) or (finite and math.isinf(value)):
            raise bad(type_message, value)
        value = float(value)
        low = lo is None or (value > lo if lo_open else value >= lo)
        high = hi is None or (value < hi if hi_open else value <= hi)
        if not (low and high):
            raise bad(message, value)
        return value

    return checked(float, check)


def choice(*allowed: str, wording: str = RANGE) -> Any:
    """One of `allowed` (strings): "is not allowed: must be one of 'a', 'b'" (COLON:
    "{field}: 'x' is not one of ['a', 'b']")."""
    listed = ", ".join(repr(a) for a in allowed)

    def check(value):
        if not isinstance(value, str) or value not in allowed:
            if wording == COLON:
                raise fail(f"{value!r} is not one of {list(allowed)}", colon=True)
            raise fail(f"is not allowed: must be one of {listed}")
        return value

    check.allowed = allowed  # what a command line's help lists (empirical.config.options)
    return checked(str, check)


def _flag(value):
    if not isinstance(value, bool):
        raise fail(f"expected true or false, got {value!r}", colon=True)
    return value


Flag = checked(bool, _flag)  # true or false (TOML's, or `true` / `false` on the command line)


def text(message: str = "must be a string") -> Any:
    """A string (never a number)."""

    def check(value):
        if not isinstance(value, str):
            raise fail(message)
        return value

    return checked(str, check)


def split_list(value: Any) -> Any:
    """A command-line list: "d,e" -> ["d", "e"]; anything else as it is."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if _is_number(value):
        return [value]
    return value


def names(what: str, item: Any = str) -> Any:
    """A tuple of `item`s: a list, or a comma-separated string ("d,e"), or (items not
    strings) one number; anything else is "must be a list of {what}"."""

    def check(value):
        if item is str and _is_number(value):
            raise fail(f"must be a list of {what}")
        value = split_list(value)
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise fail(f"must be a list of {what}")
        return tuple(value)

    return Annotated[tuple[item, ...], BeforeValidator(check)]


def positives(nan_ok: bool = False) -> Any:
    """A tuple of numbers > 0 (NaN too if `nan_ok`): a list, or "0.1,1,10" from the command
    line; anything else is "expected positive numbers, got ...". """

    def check(value):
        items = split_list(value)
        ok = isinstance(items, (list, tuple)) and len(items) > 0
        if ok:
            try:
                items = tuple(float(v) for v in items)
            except (TypeError, ValueError):
                ok = False
        if ok and any(isinstance(v, bool) for v in split_list(value)):
            ok = False
        if not ok or any(not (v > 0 or (nan_ok and math.isnan(v))) for v in items):
            shown = value if isinstance(value, str) else ",".join(map(str, split_list(value)))
            raise fail(f"expected positive numbers, got {shown!r}", colon=True)
        return items

    return Annotated[tuple[float, ...], BeforeValidator(check)]


def parsed(parse: Callable[[str], Any], base: Any = Any) -> Any:
    """A value given as text and read by `parse(text)` (a ValueError says why not); a value
    that is already read (not a string) is taken as it is."""

    def check(value):
        if not isinstance(value, str):
            return value
        try:
            return parse(value)
        except ValueError as exc:
            raise fail(str(exc), colon=True) from None

    return Annotated[base, BeforeValidator(check)]
