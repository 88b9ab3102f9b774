"""Typed dataclass configs: load from TOML/JSON, override with dotted `key=value`, save.

Every config in `empirical` is a (possibly nested) dataclass. This module is the one place that
turns files and command-line strings into those dataclasses, with errors that name the field.

    cfg = load_config(RunConfig, "configs/paper.toml", ["train.steps=20000", "seed=1"])
    save_config(cfg, run_dir / "config.toml")
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from disentangled.command_line import UserError

T = TypeVar("T")


class ConfigError(UserError, ValueError):
    """A config value, file or override that cannot be used; the message names the field."""


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def field_paths(cls: type, prefix: str = "") -> list[str]:
    """Every dotted field name of dataclass `cls`: tables (`train`) and leaves (`train.steps`)."""
    paths = []
    for name, tp in _field_types(cls).items():
        paths.append(prefix + name)
        if _is_dataclass_type(tp):
            paths += field_paths(tp, f"{prefix}{name}.")
    return paths


def did_you_mean(names: list[str], part: str, before: list[str], after: list[str]) -> str:
    """` (did you mean train.steps?)` for a mistyped field `part` among `names`, the path
    around it kept (`trian.steps` -> `train.steps`); "" if none is close."""
    import difflib

    close = difflib.get_close_matches(part, names, n=1)
    return f" (did you mean {'.'.join([*before, close[0], *after])}?)" if close else ""


def _coerce(value: Any, tp: Any, name: str) -> Any:
    """Convert `value` (from TOML/JSON or a command-line string) to the annotated type `tp`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, name)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"{name}: cannot read {value!r} as {tp}")
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a table of fields, got {value!r}")
        return from_dict(tp, value, prefix=f"{name}.")
    if origin in (list, tuple, set, frozenset):
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError:
                    value = [v.strip() for v in text.strip("[]").split(",") if v.strip()]
            else:
                value = [v.strip() for v in text.split(",") if v.strip()]
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        item_tp = args[0] if args else Any
        items = [_coerce(v, item_tp, f"{name}[{i}]") for i, v in enumerate(value)]
        return origin(items) if origin is not list else items
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                try:
                    f = float(value)
                except ValueError:
                    f = None
                if f is not None and f.is_integer():
                    return int(f)
        raise ConfigError(f"{name}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{name}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    if origin is typing.Literal:
        for allowed in args:
            if value == allowed or str(value) == str(allowed):
                return allowed
        raise ConfigError(f"{name}: {value!r} is not one of {list(args)}")
    return value


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass `cls` from a nested dict; unknown keys are an error naming the key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or cls.__name__}: expected a table, got {data!r}")
    hints = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown config field {prefix}{unknown[0]!s}"
            + did_you_mean(sorted(names), str(unknown[0]), [prefix[:-1]] if prefix else [], [])
            + "; allowed: "
            + ", ".join(f"{prefix}{n}" for n in sorted(names))
        )
    kwargs = {k: _coerce(v, hints[k], f"{prefix}{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from exc


def to_dict(cfg: Any) -> dict[str, Any]:
    """Nested plain dict (tuples become lists, None values are dropped for TOML)."""

    def clean(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: clean(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple, set, frozenset)):
            return [clean(x) for x in (sorted(v) if isinstance(v, (set, frozenset)) else v)]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return clean(cfg)


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


def apply_overrides(data: dict[str, Any], cls: type, overrides: list[str]) -> dict[str, Any]:
    """Apply dotted `a.b=value` overrides to a nested dict, checking each key against `cls`."""
    data = json.loads(json.dumps(data))  # deep copy
    for text in overrides:
        path, value = parse_override(text)
        node, tp = data, cls
        for i, part in enumerate(path):
            if not _is_dataclass_type(tp):
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
                node[part] = _coerce(value, hints[part], ".".join(path))
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
    """Defaults of `cls`, updated by the file at `path` (TOML or JSON), then by `overrides`."""
    data = to_dict(cls())
    if path is not None:
        data = _deep_update(data, read_config_file(path))
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


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc), else
    by the set-and-restore idiom."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one.

    The file gets the permissions a plain `open(path, "wb")` of a new file would give
    (0o666 minus the umask: 0644 under umask 022), not mkstemp's private 0600, so others on a
    shared file system can read what a run writes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())
        except OSError:  # a file system without permissions (some network mounts)
            pass
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # e.g. ENOSPC from write/fsync
            raise _with_path(exc, path) from exc
        raise


def _with_path(exc: OSError, path: str | os.PathLike) -> OSError:
    """The same fault, naming the file it happened to (for the one-line error)."""
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append `text` to `path` (created if missing) and fsync it. A failed write (a full
    disk, ...) is undone: the file is cut back to its previous length, so no torn line is
    left behind, and the error names the file."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            if isinstance(exc, OSError) and exc.filename is None:
                raise _with_path(exc, path) from exc
            raise
    finally:
        os.close(fd)


def fingerprint_of(data: Any) -> str:
    """sha256 (hex) of a plain-data value (dicts, lists, numbers, strings), key order aside;
    a dataclass config counts only its fields that differ from their defaults
    (`non_default_fields`), so adding a config field with a default to the code leaves
    every existing run's fingerprint as it was."""
    import hashlib

    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = non_default_fields(data)
    return hashlib.sha256(json.dumps(to_dict(data), sort_keys=True).encode()).hexdigest()


def non_default_fields(cfg: Any) -> dict[str, Any]:
    """A dataclass config as a nested plain dict of the fields whose value differs from the
    field's default (nested dataclasses compared field by field)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            nested = non_default_fields(value)
            if nested:
                out[f.name] = nested
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        if default is dataclasses.MISSING or to_dict(value) != to_dict(default):
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
    import pickle

    if isinstance(exc, pickle.UnpicklingError):
        return "UnpicklingError: not torch.save data"
    text = str(exc).strip()
    first = text.splitlines()[0].split(". ")[0].rstrip(".") if text else type(exc).__name__
    return f"{type(exc).__name__}: {first}"
