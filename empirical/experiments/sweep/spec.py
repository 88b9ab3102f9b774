"""What a sweep or a grid is. A sweep: a base run config, one swept parameter with its values,
and seeds; a sweep config file is a run config plus a `[sweep]` table (`SweepSpec`;
docs/sweep.md, "`[sweep]` table"). A grid: a base run config and named variants (lists of
overrides) x seeds; a grid config file is a run config plus a `[grid]` table (`GridSpec`;
docs/sweep.md, "Grids"). `expand_members(base, spec)` / `expand_grid` make one `Member` (a
complete RunConfig and a run directory name) per (value or variant, seed); `batch_key(cfg)`
says which members can share a batched model (the same architecture and training settings).
No torch here: a sweep or grid config is loaded and checked before torch is imported.

    [grid]
    seeds = [0, 1]
    [grid.variants]
    spec = []
    disjoint_wd01 = ['task.r2=["b", "c"]', "train.weight_decay=0.1"]
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from empirical.config.field_types import MUST, integer, number
from empirical.config.io import (
    ConfigError,
    apply_overrides,
    config_class,
    config_to_toml,
    field_paths,
    from_dict,
    read_config_file,
    to_dict,
)
from empirical.runs.config import RunConfig

# convenience names for swept parameters: alias -> (field, value -> field value, x-axis label)
ALIASES: dict[str, tuple[str, typing.Callable[[float], float], str]] = {
    # task.train_pair_fraction sets held_out_fraction = 1 - value, and an ordered split then
    # trains exactly floor(value * p * p) pairs (no 1 - (1 - value) round trip)
    "pair_fraction": (
        "task.train_pair_fraction",
        lambda v: v,
        "fraction of addition pairs in training (task.train_pair_fraction)",
    ),
}
X_LABELS = {
    "task.ratio_2var_to_0var": "2-var : 0-var ratio in training (task.ratio_2var_to_0var)",
    "task.train_pair_fraction": "fraction of addition pairs in training (task.train_pair_fraction)",
    "task.two_var_frequency": "fraction of 2-var rows kept in training (task.two_var_frequency)",
}
# fields a sweep cannot vary (with the reason, for the error message)
NOT_SWEEPABLE = {
    "seed": "give seeds with --seeds (every value is trained for every seed)",
    "name": "the sweep's name is fixed",
    "kind": "not a training setting",
    "train.device": "all members run on one device",
    "train.threads": "all members run in one process",
}
# task fields that change the model's shape (vocabulary, context): members differing in
# them go to separate batches, like members differing in a [model] field
ARCHITECTURE_TASK_FIELDS = ("p", "K", "L")
# what [sweep] and [grid] (and their commands' --max-batch and --target) take
MaxBatch = integer(0, wording=MUST)  # members per batched model (0: no limit)
Target = number(0, 1, lo_open=True)  # the target accuracy
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")  # a grid variant's name


@config_class("sweep")
class SweepSpec:
    """The `[sweep]` table of a sweep config (see the module docstring)."""

    param: str = ""
    values: list[Any] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=lambda: [0])
    metric: str = "auto"
    target: Target = 0.99
    max_batch: MaxBatch = 0
    note: str = ""

    def __post_init__(self) -> None:
        seeds = list(self.seeds)
        if not seeds:
            raise ConfigError("sweep.seeds is empty: give at least one seed")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ConfigError(f"sweep.seeds: {s!r} is not an integer >= 0")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"sweep.seeds = {seeds} repeats a seed")
        self.seeds = seeds

    @property
    def field_name(self) -> str:
        """The run-config field the swept value lands in."""
        return ALIASES[self.param][0] if self.param in ALIASES else self.param

    @property
    def short_name(self) -> str:
        """The parameter's name in member directory names: the alias or the last component."""
        return self.param if self.param in ALIASES else self.param.rsplit(".", 1)[-1]

    def x_label(self) -> str:
        if self.param in X_LABELS:
            return X_LABELS[self.param]
        if self.param in ALIASES:
            return ALIASES[self.param][2]
        if self.param == "task.held_out_fraction":
            return ALIASES["pair_fraction"][2]
        return self.param

    def x_value(self, value: Any) -> Any:
        """The plotted x of a swept value: the pair fraction for held_out_fraction sweeps."""
        if self.param == "task.held_out_fraction":
            return round(1.0 - float(value), 12)
        return value


@config_class("grid")
class GridSpec:
    """The `[grid]` table: variant name -> overrides, seeds, batch limit, target."""

    variants: dict[str, Any] = field(default_factory=dict)
    seeds: list[Any] = field(default_factory=lambda: [0])
    max_batch: MaxBatch = 0
    target: Target = 0.99

    def __post_init__(self) -> None:
        if not isinstance(self.variants, dict) or not self.variants:
            raise ConfigError("grid.variants: give at least one variant (name = [overrides])")
        for name, overrides in self.variants.items():
            if not _NAME.match(name):
                raise ConfigError(f"grid.variants: name {name!r}: use letters, digits, '_', '.', "
                                  "'+', '-'")
            if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
                raise ConfigError(
                    f"grid.variants.{name} = {overrides!r} must be a list of override strings "
                    "such as ['train.weight_decay=0.1']"
                )
        seeds = list(self.seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise ConfigError(f"grid.seeds = {self.seeds!r} must be a non-empty list of ints >= 0")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"grid.seeds = {seeds} repeats a seed")
        self.seeds = seeds


@dataclass
class Member:
    """One model of the sweep: swept value (as given), seed, complete config, directory name."""

    value: Any
    seed: int
    cfg: RunConfig
    dirname: str

    @property
    def label(self) -> str:
        return self.dirname


# ------------------------------------------------------------------------------ parsing
def check_param(param: str) -> None:
    """A clear ConfigError unless `param` is an alias or a sweepable run-config field."""
    if not param:
        raise ConfigError("no swept parameter: give --param KEY=V1,V2,... (or [sweep] param and "
                          "values)")
    if param in ALIASES:
        return
    if param in NOT_SWEEPABLE:
        raise ConfigError(f"--param {param}: cannot be swept ({NOT_SWEEPABLE[param]})")
    paths = field_paths(RunConfig)  # the task table: every family's fields
    parts = param.split(".")
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        here = [p for p in paths if p.count(".") == i and p.startswith(prefix + "." if i else "")]
        if not here:
            raise ConfigError(f"--param {param}: {prefix} has no sub-fields")
        if ".".join(parts[: i + 1]) not in here:
            aliases = ", ".join(sorted(ALIASES))
            raise ConfigError(f"--param {param}: unknown field {part!r}; allowed: "
                              f"{', '.join(sorted(here))} (or the alias {aliases})")
    if any(p.startswith(param + ".") for p in paths):
        raise ConfigError(f"--param {param}: is a table, not a field; name one of its fields")


def split_values(text: str) -> list[str]:
    """'0.5,0.4' -> ['0.5', '0.4']; with a ';' anywhere, ';' separates (for list values)."""
    sep = ";" if ";" in text else ","
    values = [v.strip() for v in text.split(sep)]
    if not text.strip() or any(not v for v in values):
        raise ConfigError(f"--param: empty value in {text!r} (write KEY=V1,V2,...)")
    return values


def parse_param(text: str) -> tuple[str, list[str]]:
    """'task.held_out_fraction=0.5,0.4' -> ('task.held_out_fraction', ['0.5', '0.4'])."""
    if "=" not in text:
        raise ConfigError(f"--param {text!r} is not of the form KEY=V1,V2,... "
                          "(e.g. task.held_out_fraction=0.5,0.4)")
    key, values = text.split("=", 1)
    key = key.strip()
    check_param(key)
    return key, split_values(values)


def _format(value: Any) -> str:
    """A value as an override string (and, cleaned, in directory names)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(round(value, 12))
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return str(value).strip()


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _exact(value: Any) -> str:
    """A value as an override string, floats exactly (repr round-trips)."""
    if isinstance(value, float):
        return repr(value)
    return _format(value)


def _dir_part(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-+=" else "_" for c in text)
    return keep.strip("_") or "value"


def _merge(base: dict, new: dict) -> dict:
    out = dict(base)
    for k, v in new.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config_with_table(
    path, table: str, overrides: list[str] | None = None
) -> tuple[RunConfig, dict | None]:
    """(base run config, the file's `[table]` or None) from a config file (None: defaults):
    everything but `[table]` is a run config, completed with RunConfig's defaults and the
    dotted run-config overrides."""
    data = dict(read_config_file(path)) if path is not None else {}
    extra = data.pop(table, None)
    if extra is not None and not isinstance(extra, dict):
        raise ConfigError(f"{path}: [{table}] must be a table")
    merged = _merge(to_dict(RunConfig()), data)
    base = from_dict(RunConfig, apply_overrides(merged, RunConfig, list(overrides or [])))
    return base, extra


def load_sweep_config(path=None, overrides: list[str] | None = None) -> tuple[RunConfig, SweepSpec]:
    """(base run config, sweep spec) from a sweep config file (or defaults) and run-config
    overrides. The file's `[sweep]` table is the spec; the rest is a run config."""
    base, sweep_table = load_config_with_table(path, "sweep", overrides)
    return base, from_dict(SweepSpec, sweep_table or {}, prefix="sweep.")


def load_grid_config(path, overrides: list[str] | None = None) -> tuple[RunConfig, GridSpec]:
    """(base run config, grid spec) from a grid config file and run-config overrides."""
    base, table = load_config_with_table(path, "grid", overrides)
    if table is None:
        raise ConfigError(f"{path}: no [grid] table (see docs/sweep.md, 'Grids')")
    return base, from_dict(GridSpec, table, prefix="grid.")


def default_sweep_dir(base: RunConfig) -> Path:
    """A sweep's directory when none is given: runs/sweep/NAME."""
    return Path("runs") / "sweep" / base.name


def expand_members(base: RunConfig, spec: SweepSpec) -> list[Member]:
    """One Member per (value, seed), values in the given order; every config is validated
    here, so a bad value fails before anything trains (ConfigError naming the value).
    Values are canonicalised through the field's type ('1' and '1.0' for a float field are
    the same value, in the same member directory)."""
    check_param(spec.param)
    if not spec.values:
        raise ConfigError(f"--param {spec.param}: no values to sweep")
    target = spec.field_name
    canon: list[tuple[Any, str, str]] = []  # (typed value, text, override text)
    for value in spec.values:
        text = _format(value)
        exact = _exact(value)  # floats reach the config unrounded (names show 12 digits)
        if spec.param in ALIASES:
            try:
                number = float(exact)
            except ValueError:
                raise ConfigError(f"--param {spec.param}: value {text!r} is not a number") from None
            if not math.isfinite(number):
                raise ConfigError(f"--param {spec.param}: value {text!r} is not finite")
            canon.append((number, _format(number), repr(ALIASES[spec.param][1](number))))
            continue
        try:
            data = apply_overrides(to_dict(base), RunConfig, [f"{target}={exact}"])
            cfg = from_dict(RunConfig, data)
        except ConfigError as exc:
            raise ConfigError(f"--param {spec.param}: value {text!r}: {exc}") from None
        typed = _get(cfg, target)
        if isinstance(typed, float) and _is_number_text(exact) and float(exact) != typed:
            raise ConfigError(f"--param {spec.param}: value {text!r} becomes {typed!r} in the run "
                              "config: another field sets this one (task.train_pair_fraction "
                              "sets task.held_out_fraction; task.mix = 'rows' sets frac_1var "
                              "and ratio_2var_to_0var); sweep that field instead")
        shown = "+".join(map(str, typed)) if isinstance(typed, (list, tuple)) else _format(typed)
        canon.append((typed, shown, _exact(typed)))
    texts = [t for _, t, _ in canon]
    if len(set(texts)) != len(texts):
        raise ConfigError(f"--param {spec.param}: repeated value in {texts}")
    variants, values, where = {}, {}, {}
    for typed, text, field_text in canon:
        name = f"{_dir_part(spec.short_name)}={_dir_part(text)}"
        variants[name] = [f"{target}={field_text}"]
        values[name] = _plain(typed)
        where[name] = f"--param {spec.param}: value {text!r}"
    members = expand_variants(base, variants, spec.seeds, values, where)
    _check_distinct(members, spec)
    return members


def expand_grid(base: RunConfig, spec: GridSpec) -> list[Member]:
    """One Member per (variant, seed), validated before anything trains."""
    return expand_variants(base, spec.variants, spec.seeds)


def _check_distinct(members: list[Member], spec: SweepSpec) -> None:
    """A ConfigError when two swept values give the same member config (the value does not
    reach the model: e.g. task.held_out_fraction under a set task.train_pair_fraction)."""
    seen: dict[str, Any] = {}
    for m in members:
        if m.seed != members[0].seed:
            continue
        key = config_to_toml(dataclasses.replace(m.cfg, name="member"))
        if key in seen:
            raise ConfigError(f"--param {spec.param}: values {seen[key]!r} and {m.value!r} give "
                              "the same run config (the field is overridden or unused by this "
                              "config)")
        seen[key] = m.value


SEED_PLACEHOLDER = "{seed}"  # in a variant's override: the member's seed


def expand_variants(
    base: RunConfig,
    variants: dict[str, list[str]],
    seeds: list[int],
    values: dict[str, Any] | None = None,
    where: dict[str, str] | None = None,
) -> list[Member]:
    """One Member per (variant, seed), validated here: the base config with the variant's
    overrides, named `{base.name}.{variant}`, in the member directory `{variant}_seed{seed}`
    (a grid; a sweep is the grid of `param=value` variants). values: each variant's
    Member.value (default: its name); where: its name in error messages (default
    `grid.variants.NAME`). `{seed}` in an override stands for the member's seed."""
    members = []
    for name, overrides in variants.items():
        for seed in seeds:
            data = to_dict(dataclasses.replace(base, seed=int(seed), name=f"{base.name}.{name}"))
            mine = [o.replace(SEED_PLACEHOLDER, str(int(seed))) for o in overrides]
            try:
                cfg = from_dict(RunConfig, apply_overrides(data, RunConfig, mine))
            except ConfigError as exc:
                label = (where or {}).get(name, f"grid.variants.{name}")
                raise ConfigError(f"{label}: {exc}") from None
            value = (values or {}).get(name, name)
            members.append(Member(value, int(seed), cfg, f"{name}_seed{seed}"))
    return members


def _get(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _plain(value: Any) -> Any:
    """A value as JSON would hold it (tuples as lists)."""
    return list(value) if isinstance(value, tuple) else value


# [train] fields members of one batched model may differ in (a per-member optimiser)
PER_MEMBER_TRAIN_FIELDS = ("lr", "weight_decay", "freeze", "project_out")


def batch_key(cfg: RunConfig) -> str:
    """Members with equal keys can train as one batched model: the same built architecture
    (model fields and the task's p, K, L) and the same [train] settings, except lr, weight
    decay and the update constraints (freeze, project_out: PER_MEMBER_TRAIN_FIELDS)."""
    task = {k: getattr(cfg.task, k, None) for k in ARCHITECTURE_TASK_FIELDS}  # lego: no p
    train = {k: v for k, v in to_dict(cfg.train).items() if k not in PER_MEMBER_TRAIN_FIELDS}
    model = to_dict(cfg.built_model_config())
    return json.dumps({"model": model, "train": train, "task": task}, sort_keys=True)


def describe_key_difference(a: RunConfig, b: RunConfig) -> list[str]:
    """Fields that make two members' batch keys differ (for messages)."""
    da, db = json.loads(batch_key(a)), json.loads(batch_key(b))
    return [f"{s}.{k}" for s in da for k in da[s] if da[s][k] != db[s][k]]


def sweep_to_toml(base: RunConfig, spec: SweepSpec) -> str:
    """The resolved sweep as a sweep config file (what `sweep.toml` in the sweep dir holds)."""
    text = config_to_toml(base)
    table = {k: v for k, v in to_dict(spec).items() if v is not None}
    return text + "\n" + tomli_w.dumps({"sweep": table})
