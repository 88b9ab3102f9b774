"""Typed configs: load from TOML/JSON, override with dotted `key=value`, save.

Every config is a (nested) pydantic dataclass (`config_class`) whose fields declare their
checks (empirical.config.field_types). This module turns files and command-line strings into
those classes, with one-line errors naming the field, the value and what is allowed.

    cfg = load_config(RunConfig, "configs/paper.toml", ["train.steps=20000", "seed=1"])
    save_config(cfg, run_dir / "config.toml")

Also here: `load_failure`. Files are written by empirical.report.files. No torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import os
import pickle
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.dataclasses import is_pydantic_dataclass

from disentangled.errors import UserError
from empirical.config.field_types import CHECK
from empirical.report.files import atomic_write_bytes

T = TypeVar("T")


class ConfigError(UserError, ValueError):
    """A config value, file or override that cannot be used; the message names the field."""


CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def checked_dataclass(cls: type[T], error: Callable[[ValidationError, type], Exception],
                      **options) -> type[T]:  # fmt: skip
    """`cls` as a pydantic dataclass (`options`: pydantic's, e.g. frozen, kw_only) whose
    construction, by `dataclasses.replace` too, turns a ValidationError into `error(exc,
    cls)`, one line for the user."""
    cls = pydantic_dataclass(cls, config=CONFIG, **options)
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except ValidationError as exc:
            raise error(exc, type(self)) from None

    cls.__init__ = __init__
    return cls


def config_class(section: str = "", frozen: bool = False):
    """Decorator: a config class, a pydantic dataclass (validated on construction, by
    `dataclasses.replace` too) whose errors are one ConfigError line naming the field as
    `{section}.{field}`; unknown fields are errors. Still a dataclass (`dataclasses.fields`,
    `replace`, `asdict` work); `frozen` as a dataclass's."""

    def wrap(cls: type[T]) -> type[T]:
        cls = checked_dataclass(
            cls, lambda exc, c: ConfigError(explain(exc, c, section)), frozen=frozen
        )
        cls.__config_section__ = section
        return cls

    return wrap


def _field_types(cls: Any) -> dict[str, Any]:
    """{name: type} of a config class's fields, as pydantic read them ({} if not a config);
    of a union of config classes (the task config: one class per family), every member's."""
    if typing.get_origin(cls) is typing.Annotated:
        cls = typing.get_args(cls)[0]
    if typing.get_origin(cls) in (typing.Union, types.UnionType):
        return {k: v for member in typing.get_args(cls) for k, v in _field_types(member).items()}
    if not is_pydantic_dataclass(cls):
        return {}
    return {name: f.annotation for name, f in cls.__pydantic_fields__.items()}


def _is_table(tp: Any) -> bool:
    """Whether a field of type `tp` is a table of fields (a config class, or a union of them)."""
    return bool(_field_types(tp))


def field_paths(cls: type, prefix: str = "") -> list[str]:
    """Every dotted field name of dataclass `cls`: tables (`train`) and leaves (`train.steps`)."""
    paths = []
    for name, tp in _field_types(cls).items():
        paths += [prefix + name, *field_paths(tp, f"{prefix}{name}.")]
    return paths


def did_you_mean(names: list[str], part: str, before: list[str], after: list[str]) -> str:
    """` (did you mean train.steps?)` for a mistyped field `part` among `names`, the path
    around it kept (`trian.steps` -> `train.steps`); "" if none is close."""
    close = difflib.get_close_matches(part, names, n=1)
    return f" (did you mean {'.'.join([*before, close[0], *after])}?)" if close else ""


# -- validation errors, in one line ------------------------------------------------------------
_TYPE_WORDS = {
    "int": "expected an integer", "float": "expected a number", "bool": "expected true or false",
    "string": "expected a string", "tuple": "expected a list", "list": "expected a list",
    "dataclass": "expected a table of fields", "dict": "expected a table of fields",
    "literal": "is not one of",
}  # fmt: skip


def _class_at(cls: type, loc: tuple) -> type | None:
    """The config class that holds the field at `loc` (its last part), or None."""
    for part in loc[:-1]:
        cls = _field_types(cls).get(part) if isinstance(part, str) else None
    return cls if is_pydantic_dataclass(cls) else None


def _unknown_field(cls: type, loc: tuple, prefix: str) -> str:
    names = sorted(_field_types(_class_at(cls, loc)))
    before = [prefix] if prefix else []
    before += [str(p) for p in loc[:-1]]
    at = ".".join(before + [str(loc[-1])])
    return (
        f"unknown config field {at}"
        + did_you_mean(names, str(loc[-1]), before, [])
        + "; allowed: "
        + ", ".join(".".join(before + [n]) for n in names)
    )


def explain(exc: ValidationError, cls: type, prefix: str = "") -> str:
    """A pydantic ValidationError of config class `cls` as one line naming the field (the
    first error; a ConfigError raised by a check is its own message)."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    inner = ctx.get("error")
    if isinstance(inner, ConfigError):
        return str(inner)
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        return _unknown_field(cls, loc, prefix)
    parts = ([prefix] if prefix else []) + [
        f"[{p}]" if isinstance(p, int) else str(p) for p in loc
    ]
    path = ".".join(parts).replace(".[", "[") or (prefix or cls.__name__)
    if kind == CHECK:
        message = ctx["message"]
        if ctx.get("colon"):
            return f"{path}: {message}"
        return f"{path} = {value!r}{'' if message.startswith(':') else ' '}{message}"
    if inner is not None:
        return f"{path} = {value!r}: {inner}"
    head = kind.split("_")[0]
    words = _TYPE_WORDS.get(head)
    if head == "literal":
        return f"{path}: {value!r} is not one of [{ctx.get('expected', '')}]"
    if words:
        return f"{path}: {words}, got {value!r}"
    return f"{path} = {value!r}: {err['msg']}"


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Config class `cls` from a nested dict (TOML/JSON values), validated; unknown keys and
    bad values are a ConfigError naming the field (`prefix` before its path)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: expected a table, got {data!r}")
    section = prefix.rstrip(".") or getattr(cls, "__config_section__", "")
    try:
        return TypeAdapter(cls).validate_python(data)
    except ValidationError as exc:
        raise ConfigError(explain(exc, cls, section)) from None


def _omitted(cfg: Any, f: dataclasses.Field) -> bool:
    """Whether field `f` of `cfg` is left out of its dict: a field its class lists in
    `__omit_default__` (one added after configs were saved), at its default."""
    omit = getattr(type(cfg), "__omit_default__", ())
    return f.name in omit and getattr(cfg, f.name) == f.default


def to_dict(cfg: Any) -> dict[str, Any]:
    """Nested plain dict (tuples become lists, None values are dropped for TOML; a field in
    its class's `__omit_default__` is left out at its default, so that the configs saved
    before it existed stay as they were)."""

    def clean(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: clean(getattr(v, f.name)) for f in dataclasses.fields(v)
                    if not _omitted(v, f)}  # fmt: skip
        if isinstance(v, (list, tuple, set, frozenset)):
            return [clean(x) for x in (sorted(v) if isinstance(v, (set, frozenset)) else v)]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return clean(cfg)


def dotted(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict (`to_dict`'s) flattened to its dotted keys: {"train.lr": 0.001, ...}."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _drop_none(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    if isinstance(d, list):
        return [_drop_none(v) for v in d]
    return d


def parse_override(text: str) -> tuple[list[str], str]:
    if "=" not in text:
        raise ConfigError(
            f"override {text!r} is not of the form key=value (e.g. train.steps=20000)"
        )
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    return key.split("."), value.strip()


def command_line_value(text: str, tp: Any) -> Any:
    """An override's value (`train.steps=2000`: "2000") as the field of type `tp` takes it:
    a TOML literal (a number, true / false, a list `[1, 2]`, a quoted string), `none` for
    None, the text itself for a string field or where no literal reads; a list field also
    takes `d,e`. Checking it is the config class's (pydantic)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return command_line_value(text, args[0])
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in ("none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        return command_line_value(text, rest[0]) if len(rest) == 1 else _literal(text)
    if tp is str or origin is typing.Literal:
        return text
    if origin in (list, tuple, set, frozenset):
        value = _literal(text) if text.startswith("[") else None
        if isinstance(value, list):
            return value
        items = [v.strip() for v in text.strip("[]").split(",") if v.strip()]
        return items if args and args[0] is str else [_literal(v) for v in items]
    return _literal(text)


def _literal(text: str) -> Any:
    """A TOML literal (`2000`, `3e-3`, `true`, `[0.9, 0.98]`, `"x"`), else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], cls: type, overrides: list[str]) -> dict[str, Any]:
    """Apply dotted `a.b=value` overrides to a nested dict, checking each key against `cls`
    (an unknown one is a ConfigError with a did-you-mean; a union of config classes takes
    any member's field, its validation tells); values read as `command_line_value` reads them."""
    data = json.loads(json.dumps(data))  # deep copy
    for text in overrides:
        path, value = parse_override(text)
        node, tp = data, cls
        for i, part in enumerate(path):
            if not _is_table(tp):
                raise ConfigError(f"override {text!r}: {'.'.join(path[:i])} has no sub-fields")
            hints = _field_types(tp)
            if part not in hints:
                allowed = ", ".join(sorted(hints))
                raise ConfigError(
                    f"override {text!r}: unknown field {part!r}"
                    + did_you_mean(list(hints), part, path[:i], path[i + 1 :])
                    + f"; allowed: {allowed}"
                )
            if i == len(path) - 1:
                node[part] = command_line_value(value, hints[part])
            else:
                node = node.setdefault(part, {})
                tp = hints[part]
    return data


def read_config_file(path: str | os.PathLike, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The tables of a TOML or JSON config file. A top-level `base = "other.toml"` (a path
    relative to this file) inherits every value of that file, which this file's values then
    override table by table (a variant of a config without copying it)."""
    path = Path(path)
    data = _read_one_config_file(path)
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str) or not base:
        raise ConfigError(f"config file {path}: base = {base!r} must be a config file path")
    base_path = (path.parent / base).resolve()
    if base_path in _seen or base_path == path.resolve():
        raise ConfigError(f"config file {path}: base = {base!r} makes a cycle of base files")
    try:
        inherited = read_config_file(base_path, (*_seen, path.resolve()))
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: its base {base!r}: {exc}") from None
    return _deep_update(inherited, data)


def _read_one_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"config file {path} is not valid {path.suffix[1:].upper()}: {exc}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
            "give a TOML or JSON config file"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table of fields, got {data!r}")
    return data


def load_config(
    cls: type[T], path: str | os.PathLike | None = None, overrides: list[str] | None = None
) -> T:
    """Defaults of `cls`, updated by the file at `path` (TOML or JSON), then by `overrides`
    (`cls` a config class, or a union of them such as the task config)."""
    data = read_config_file(path) if path is not None else {}  # from_dict fills in defaults
    data = apply_overrides(data, cls, list(overrides or []))
    return from_dict(cls, data)


def _deep_update(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


def fingerprint_of(data: Any) -> str:
    """sha256 (hex) of a plain-data value (dicts, lists, numbers, strings), key order aside;
    a dataclass config counts only its fields that differ from their defaults
    (`non_default_fields`), so adding a config field with a default to the code leaves
    every existing run's fingerprint as it was."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = non_default_fields(data)
    return hashlib.sha256(json.dumps(to_dict(data), sort_keys=True).encode()).hexdigest()


def non_default_fields(cfg: Any, default: Any = None) -> dict[str, Any]:
    """A dataclass config as a nested plain dict of the fields whose value differs from the
    field's default (nested dataclasses compared field by field). `default`: a config whose
    values are the defaults of the fields it has; a nested config of another class than its
    field's default (a task of another family than the default's) is compared with that
    default where they share a field (`family` included)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        base = f.default
        if base is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            base = f.default_factory()
        if default is not None and hasattr(default, f.name):
            base = getattr(default, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            other = dataclasses.is_dataclass(base) and type(base) is not type(value)
            nested = non_default_fields(value, base if other else None)
            if nested:
                out[f.name] = nested
            continue
        if base is dataclasses.MISSING or to_dict(value) != to_dict(base):
            out[f.name] = to_dict(value)
    return out


def config_to_toml(cfg: Any) -> str:
    return tomli_w.dumps(_drop_none(to_dict(cfg)))


def save_config(cfg: Any, path: str | os.PathLike) -> None:
    """Save as TOML (or JSON if the suffix is .json), atomically."""
    path = Path(path)
    if path.suffix == ".json":
        text = json.dumps(to_dict(cfg), indent=2)
    else:
        text = config_to_toml(cfg)
    atomic_write_bytes(path, text.encode())


def load_failure(exc: BaseException) -> str:
    """A short account of why torch.load failed on a file (its first sentence, and not
    torch's advice to retry with weights_only=False, which would run a file's pickled code)."""
    if isinstance(exc, pickle.UnpicklingError):
        return "UnpicklingError: not torch.save data"
    text = str(exc).strip()
    first = text.splitlines()[0].split(". ")[0].rstrip(".") if text else type(exc).__name__
    return f"{type(exc).__name__}: {first}"
