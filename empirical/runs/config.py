"""`RunConfig`: everything one training run needs, as one typed dataclass.

    [task]   the task, its family's config (empirical.task.config.TaskConfig)
    [model]  the architecture (empirical.model.ModelConfig; vocabulary sizes come from the task)
    [train]  optimiser, schedule, evaluation and checkpoint cadence (TrainConfig)
    seed     seeds the model init, the data stream, the held-out pairs and the evaluation sets

Load with `load_run_config("configs/paper.toml", ["train.steps=2000", "seed=1"])`; the run
directory keeps the resolved config as `config.toml`.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path
from typing import Literal

from empirical.config.field_types import MUST, Flag, checked, fail, integer, names, number, text
from empirical.config.io import (
    ConfigError,
    config_class,
    field_paths,
    fingerprint_of,
    load_config,
    non_default_fields,
)
from empirical.model.config import ModelConfig
from empirical.model.groups import check_groups
from empirical.task.config import TaskConfig, task_config
from empirical.task.registry import family_of

# the main config: the paper authors' own configuration (configs/paper.toml is our earlier
# reconstruction from the paper's text; README, "Which config")
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "authors.toml"


AUTOCAST = ("none", "bf16")
DEVICE_RE = re.compile(r"auto|cpu|cuda(:\d+)?")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")


def allowed_choice(said: str | None, *allowed: str):
    """One of `allowed`: "{field} = 'x': allowed 'a', 'b'" (or `said` after "allowed")."""

    def check(value):
        if not isinstance(value, str) or value not in allowed:
            raise fail(f": allowed {said or ', '.join(map(repr, allowed))}")
        return value

    return checked(str, check)


def _betas(value):
    ok = isinstance(value, (list, tuple)) and len(value) == 2
    if not ok or not all(isinstance(b, (int, float)) and not isinstance(b, bool)
                         and 0 <= b < 1 for b in value):  # fmt: skip
        raise fail("must be two numbers in [0, 1)")
    return tuple(float(b) for b in value)


def _device(value):
    if not isinstance(value, str) or not DEVICE_RE.fullmatch(value):
        raise fail(": allowed 'auto', 'cpu', 'cuda' or 'cuda:N' (N an integer >= 0)")
    return value


def _run_name(value):
    if not isinstance(value, str) or not value or "/" in value:
        raise fail("must be a non-empty name without '/'")
    return value


Seed = integer(0, wording=MUST)  # a run's seed (RunConfig.seed, `train --seeds`, `sample --seed`)
betas_type = checked(tuple[float, float], _betas)
device_name = checked(str, _device)
run_name = checked(str, _run_name)


@config_class("train")
class TrainConfig:
    """AdamW on on-the-fly batches (paper Section 3; the numbers are ours, see task.md);
    docs/training.md has every field."""

    steps: integer(1, wording=MUST) = 20_000
    batch_size: integer(1, wording=MUST) = 512
    lr: number(0, None, lo_open=True, message="must be a finite number > 0") = 3e-3
    # lr and weight decay: the spec's readings 1e-3 and 1.0 leave the var-restricted sets
    # below 60% in 20k steps (docs/training_search.md)
    weight_decay: number(0, None, message="must be a finite number >= 0") = 0.1
    betas: betas_type = (0.9, 0.98)
    warmup_steps: integer(0, wording=MUST) = 0  # linear warm-up of the learning rate from 0
    warmup_from: integer(0, wording=MUST) = 0  # the warm-up's first step (set by a resume)
    lr_schedule: allowed_choice("'constant' or 'cosine'", "constant", "cosine") = "cosine"
    grad_clip: number(0, None, lo_open=True, message="must be > 0 or unset") | None = None
    divergence_factor: number(0, None, message="must be a finite number >= 0 (0: off)") = 10.0
    # (a checkpoint window's mean loss above this many times the earlier windows' median and
    # above ln(p) stops the run; 0: only a non-finite loss does)
    autocast: allowed_choice(None, *AUTOCAST) = "none"  # "bf16": forward and loss in bf16
    init_from: text() = ""  # a model file whose weights replace the seeded initialisation
    # every initial weight w becomes w (1 + s z), z standard normal from its own seed (0: off):
    # rounding-sized differences between runs that share the seed, hence the data stream
    init_perturbation: number(0, None, message="must be a finite number >= 0 (0: off)") = 0.0
    init_perturbation_seed: integer(0, wording=MUST) = 0
    compile: allowed_choice(None, *COMPILE_MODES) = "none"  # torch.compile forward + loss
    cuda_graph: Flag = True  # on CUDA (compile = "none"): the whole step as one CUDA graph
    eval_every: integer(1, wording=MUST) = 250  # evaluate every set every this many steps
    eval_subsample: integer(0, wording=MUST) = 0  # > 0: evaluations between full ones read
    # a fixed random subsample of this many sequences per set
    full_eval_every: int = 1000  # with eval_subsample: every sequence at these multiples
    checkpoint_every: integer(1, wording=MUST) = 1000  # resumable checkpoint cadence
    snapshot_every: integer(0, wording=MUST) = 250  # weights-only snapshot (0: none)
    eval_batch_size: integer(1, wording=MUST) = 4096
    sample_chunk: integer(1, wording=MUST) = 1  # steps' batches drawn per sampler call
    device: device_name = "auto"  # "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...
    threads: integer(0, wording=MUST) = 1  # torch CPU threads (0: torch's default)
    tensorboard: Flag = False  # also write the metrics as TensorBoard scalars
    freeze: names("parameter groups") = ()  # parameter groups (empirical.model.groups) held
    # fixed (empirical/train/constraints.py)
    project_out: text() = ""  # a labelled direction file (constraints.save_direction) whose
    # compare-qk component is removed from every update of the last block's W_QK

    def __post_init__(self) -> None:
        """The fields together (each alone is checked by its type)."""
        for name in ("checkpoint_every", "steps"):
            if getattr(self, name) % self.sample_chunk:
                raise ConfigError(
                    f"train.{name} = {getattr(self, name)} must be a multiple of "
                    f"train.sample_chunk = {self.sample_chunk} (checkpoints fall on chunk "
                    "boundaries, so a resumed or extended run draws the same data)"
                )
        full = self.full_eval_every
        if self.eval_subsample and (
            isinstance(full, bool) or not isinstance(full, int) or full < 1
            or full % self.eval_every
        ):  # fmt: skip
            raise ConfigError(
                f"train.full_eval_every = {full!r} must be a positive multiple of "
                f"train.eval_every = {self.eval_every} when train.eval_subsample is set"
            )
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        try:
            self.freeze = tuple(check_groups(self.freeze, "train.freeze"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        factor = self.divergence_factor
        if factor and factor <= 1:
            raise ConfigError(
                f"train.divergence_factor = {factor!r}: must be > 1 (a loss above the running "
                "median is normal), or 0 to turn the check off"
            )


@config_class()
class RunConfig:
    """One training run: task, model, training, and the seed that fixes all randomness."""

    name: run_name = "paper"
    seed: Seed = 0
    task: TaskConfig = field(default_factory=task_config)  # its `family` chooses its class
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    kind: Literal["run"] = "run"

    def __post_init__(self) -> None:
        model = self.built_model_config()  # a model size that conflicts with the task: error
        if self.train.project_out and model.n_heads != 1:
            raise ConfigError(
                f"train.project_out = {self.train.project_out!r} needs one head (compare-qk's "
                f"labels); this run has model.n_heads = {model.n_heads}"
            )

    def built_model_config(self) -> ModelConfig:
        """The model config with its vocabulary and context sizes filled in from the task
        (its family's token layout: values, variables, length)."""
        return self.model.with_task(*family_of(self.task).layout(self.task))


def load_run_config(path=None, overrides: list[str] | None = None) -> RunConfig:
    """RunConfig defaults, then the TOML/JSON file at `path`, then dotted overrides."""
    return load_config(RunConfig, path, overrides)


# -- what a run directory holds is checked against its config --------------------------------

# fields a resumed run (or a resumed sweep member) may change: how long, where, how fast
RESUMABLE_CHANGES = frozenset(
    {"steps", "device", "threads", "eval_batch_size", "compile", "cuda_graph", "tensorboard"}
)
# fields `train --resume` may also change, explicitly, to recover from a divergence
RECOVERY_CHANGES = frozenset(
    {"lr", "grad_clip", "warmup_steps", "warmup_from", "divergence_factor"}
)


# [train] fields that say how a run is executed, not which run it is: a resume may change
# them, or (sample_chunk) they give the very data on the CPU and another realization of the
# same distribution on CUDA, as train.device does
NOT_FINGERPRINTED = RESUMABLE_CHANGES | RECOVERY_CHANGES | {"sample_chunk"}


def config_fingerprint(cfg: RunConfig) -> str:
    """The identity of a run: sha256 of its config (seed included) without the [train]
    fields of NOT_FINGERPRINTED (what a resume may change, and sample_chunk). Every checkpoint,
    snapshot and metrics record a run writes carries it; one carrying another fingerprint
    comes from another run. (Its evaluation sets carry the `task_fingerprint` of its [task]
    table and seed, which is all they depend on.)"""
    data = non_default_fields(cfg)
    for name in NOT_FINGERPRINTED:
        data.get("train", {}).pop(name, None)
    return fingerprint_of(data)


def config_field(name: str) -> str | None:
    """The dotted RunConfig field that flag name `name` (`steps`, `train.steps`, `eval-size`)
    names, or None."""
    name = name.replace("-", "_")
    for path in field_paths(RunConfig):
        if name in (path, path.rsplit(".", 1)[-1]):
            return path
    return None
