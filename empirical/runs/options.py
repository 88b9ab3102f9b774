"""The command lines of the commands on run directories and run configs, declared once
(empirical.config.options): `import-checkpoints` (ImportOptions), `unlock` (UnlockOptions) and
`sample` (SampleOptions, with the part of a run config it reads: SampleConfig), and what
`train` and `reproduce` share (RunConfigOptions: a run config file and dotted overrides) and
`evaluate` (--threads). No torch here: `python -m empirical` reads and checks these before the
command's module is imported.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic.dataclasses import dataclass as pydantic_dataclass

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, integer
from empirical.config.io import (
    CONFIG,
    ConfigError,
    apply_overrides,
    config_class,
    from_dict,
    read_config_file,
    to_dict,
)
from empirical.config.options import arg, options_class
from empirical.runs.config import (
    DEFAULT_CONFIG,
    RunConfig,
    Seed,
    config_field,
    device_name,
    load_run_config,
)
from empirical.task.config import TaskConfig, task_config
from empirical.task.registry import all_families

Threads = integer(0, wording=MUST)  # torch CPU threads (0: torch's default)


def threads_arg():
    """`--threads N` (default 1, the fastest on a CPU for these models)."""
    return arg(1, help="torch CPU threads (0: torch's default; 1: the fastest here)")


def overrides_arg(example: str = "train.steps=2000"):
    """The dotted config overrides, as words after the command (`train.steps=100 seed=1`)."""
    return arg((), help=f"dotted config overrides, e.g. {example}", positional=True, nargs="*",
               raw=True)  # fmt: skip


@pydantic_dataclass(config=CONFIG, kw_only=True)
class RunConfigOptions:
    """What `train` and `reproduce` share: dotted overrides on a run config file (default
    configs/authors.toml where it exists, else the RunConfig defaults)."""

    overrides: tuple[str, ...] = overrides_arg()
    config: str | None = arg(None, help=f"TOML config (default: {DEFAULT_CONFIG.name} if present)")

    def config_path(self) -> str | Path | None:
        return self.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)

    def run_config(self) -> RunConfig:
        """The run config: the file, then the overrides (a ConfigError naming a bad field)."""
        return load_run_config(self.config_path(), list(self.overrides))


# -- import-checkpoints -------------------------------------------------------------------------


@options_class("import-checkpoints",
               "Turn the paper authors' TransformerLens checkpoints into a run directory.",
               field_hint=config_field, intermixed=True)  # fmt: skip
class ImportOptions:
    """`python -m empirical import-checkpoints SRC --out RUN_DIR [key=value ...]`."""

    src: str = arg(help="folder of checkpoint_step_N.pth files (+ model_state_dict.pth)",
                   positional=True)  # fmt: skip
    overrides: tuple[str, ...] = overrides_arg("seed=1")
    config: str | None = arg(None, help=f"run config (default: configs/{DEFAULT_CONFIG.name})")
    out: str = arg(help="the run directory to write")
    train_pairs: str | None = arg(
        None, help="JSON list of the run's ordered training pairs: refuse unless the config's "
        "held-out pairs are exactly the others")  # fmt: skip
    final_step: integer(0, wording=MUST) | None = arg(
        None, help="step of model_state_dict.pth (default: the config's train.steps)")
    overwrite: Flag = arg(False, help="replace an existing --out of any content")
    threads: Threads = threads_arg()
    quiet: Flag = arg(False, help="no progress and no summary line")

    def config_path(self) -> str | Path:
        return self.config or DEFAULT_CONFIG

    def check(self) -> None:
        """The config and its overrides read, and SRC a folder, before torch is imported."""
        load_run_config(self.config_path(), list(self.overrides))
        src = Path(self.src)
        if not src.is_dir():
            what = "not a folder" if src.exists() else "no such folder"
            raise UsageError(f"{src}: {what} (give the folder of checkpoint_step_N.pth files)")


# -- unlock -------------------------------------------------------------------------------------


@options_class("unlock", "Remove the lock file a killed writer left in a directory.")
class UnlockOptions:
    """`python -m empirical unlock DIR`."""

    directory: str = arg(help="a run, sweep or grid directory", positional=True)
    force: Flag = arg(False, help="no effect (kept for old scripts)")

    def check(self) -> None:
        if not Path(self.directory).is_dir():
            raise UsageError(f"{self.directory}: no such directory")


# -- sample -------------------------------------------------------------------------------------


@config_class()
class SampleConfig:
    """The part of a run config `sample` reads."""

    seed: Seed = 0
    task: TaskConfig = dataclasses.field(default_factory=task_config)


def load_sample_config(path: str | None, overrides: list[str]) -> SampleConfig:
    """The `task` table and `seed` of the config file at `path` (None: the defaults), then
    `task.FIELD=VALUE` and `seed=VALUE` overrides (a ConfigError for any other)."""
    data = to_dict(SampleConfig())
    if path is not None:
        file_data = read_config_file(path)
        if "task" in file_data:
            if not isinstance(file_data["task"], dict):
                raise ConfigError(f"config file {path}: `task` must be a table")
            data["task"].update(file_data["task"])
        if "seed" in file_data:
            data["seed"] = file_data["seed"]
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if key != "seed" and not key.startswith("task."):
            raise ConfigError(
                f"override {text!r}: `sample` takes task.FIELD=VALUE or seed=VALUE overrides"
            )
    return from_dict(SampleConfig, apply_overrides(data, SampleConfig, overrides))


def _sample_field(name: str) -> str | None:
    """The override an unknown flag may mean (`--p 7`: task.p=7), never a field sample
    refuses."""
    field = config_field(name)
    return field if field == "seed" or (field or "").startswith("task.") else None


def _split_help() -> str:
    """--split's help, listing every family's set names (their modules import torch: made
    only for --help)."""
    names = "; ".join(h for f in all_families() if (h := f.split_help()))
    return f"'train' (fresh on-the-fly batch) or an evaluation set: {names}"


@options_class("sample", "Print sequences of the training distribution or of an evaluation "
               "set, one per line with its label.", field_hint=_sample_field)  # fmt: skip
class SampleOptions:
    """`python -m empirical sample [--split S] [--n N] [task.FIELD=VALUE ...]`."""

    split: str = arg("train", help=_split_help)
    n: integer(0, wording=MUST) = arg(10, help="sequences to print (at most the set)")
    seed: Seed | None = arg(None, help="run seed (default: the config's, else 0)")
    held_out: Flag = arg(False, help="print the held-out pairs `x y`")
    tokens: Flag = arg(False, help="print the padded token form")
    config: str | None = arg(None, help="TOML/JSON run config (its task table, seed)")
    device: device_name = arg("cpu", help="device for training batches: cpu, cuda, cuda:N or "
                              "auto")  # fmt: skip
    overrides: tuple[str, ...] = arg((), help="task.FIELD=VALUE or seed=VALUE", positional=True,
                                     nargs="*", raw=True)  # fmt: skip

    def sample_config(self) -> SampleConfig:
        return load_sample_config(self.config, list(self.overrides))

    def check(self) -> None:
        """The config file and the overrides read before torch is imported."""
        self.sample_config()


# -- trivial-rules ------------------------------------------------------------------------------


@options_class("trivial-rules", "What rules that resolve a variable without its own "
               "binding score on each evaluation set: the floor a claim must beat.")
class TrivialRulesOptions:
    """`python -m empirical trivial-rules --config CONFIG [--sets S ...] [task.FIELD=VALUE ...]`
    (empirical.analysis.trivial_rules)."""

    config: str | None = arg(None, help="TOML/JSON run config (its task table, seed)")
    seed: Seed | None = arg(None, help="the evaluation sets' seed (default: the config's, else 0)")
    sets: tuple[str, ...] = arg((), help="evaluation sets (default: all)", nargs="+", raw=True)
    overrides: tuple[str, ...] = arg((), help="task.FIELD=VALUE or seed=VALUE", positional=True,
                                     nargs="*", raw=True)  # fmt: skip

    def sample_config(self) -> SampleConfig:
        cfg = load_sample_config(self.config, list(self.overrides))
        return cfg if self.seed is None else dataclasses.replace(cfg, seed=self.seed)

    def check(self) -> None:
        """The config file and the overrides read before torch is imported."""
        self.sample_config()
