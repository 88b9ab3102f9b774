"""`RunConfig`: everything one training run needs, as one typed dataclass.

    [task]   the assign-and-add task (empirical.task.TaskConfig)
    [model]  the architecture (empirical.model.ModelConfig; vocabulary sizes come from the task)
    [train]  optimiser, schedule, evaluation and checkpoint cadence (TrainConfig)
    seed     seeds the model init, the data stream, the held-out pairs and the evaluation sets

Load with `load_run_config("configs/paper.toml", ["train.steps=2000", "seed=1"])`; the run
directory keeps the resolved config as `config.toml`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from empirical.config_io import ConfigError, load_config
from empirical.model import ModelConfig
from empirical.task import TaskConfig


@dataclass
class TrainConfig:
    """AdamW on on-the-fly batches (paper Section 3; the numbers are ours, see task.md)."""

    steps: int = 20_000
    batch_size: int = 512
    lr: float = 3e-3  # (spec's reading 1e-3; see weight_decay)
    weight_decay: float = 0.1  # spec's reading 1.0: var-restricted sets then stay below 60%
    # in 20k steps; with lr 3e-3 and cosine decay every set reaches >= 99% on CPU seeds 0-2
    # (docs/training_search.md)
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 0  # linear warm-up of the learning rate from 0
    lr_schedule: str = "cosine"  # after the warm-up: "constant" or "cosine" (to 0 at steps)
    grad_clip: float | None = None  # max global grad norm (None: no clipping)
    eval_every: int = 250  # evaluate every evaluation set every this many steps
    checkpoint_every: int = 1000  # resumable checkpoint (model + optimiser + RNG) cadence
    snapshot_every: int = 250  # weights-only snapshot for analysis over training (0: none)
    eval_batch_size: int = 4096
    sample_chunk: int = 1  # draw this many steps' batches per sampler call: fewer small kernel
    # launches on a GPU; on the CPU the same data as 1, on CUDA another stream of the same
    # distribution. steps and checkpoint_every must be multiples of it
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...
    threads: int = 1  # torch CPU threads (0: torch's default). 1 is fastest on our 2-core
    # machines: `python benchmarks/bench_train.py` measured 20 ms/step with 1 thread and
    # 120-500 ms/step with 2 (small ops pay for waking the second thread)

    def __post_init__(self) -> None:
        positive = (
            "steps",
            "batch_size",
            "eval_every",
            "checkpoint_every",
            "eval_batch_size",
            "sample_chunk",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"train.{name} = {value!r} must be an integer >= 1")
        for name in ("warmup_steps", "snapshot_every", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"train.{name} = {value!r} must be an integer >= 0")
        for name in ("checkpoint_every", "steps"):
            if getattr(self, name) % self.sample_chunk:
                raise ConfigError(
                    f"train.{name} = {getattr(self, name)} must be a multiple of "
                    f"train.sample_chunk = {self.sample_chunk} (checkpoints fall on chunk "
                    "boundaries, so a resumed or extended run draws the same data)"
                )
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"train.lr = {self.lr!r} must be a finite number > 0")
        wd = self.weight_decay
        if not (isinstance(wd, (int, float)) and math.isfinite(wd) and wd >= 0):
            raise ConfigError(f"train.weight_decay = {wd!r} must be a finite number >= 0")
        betas = tuple(self.betas)
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas):
            raise ConfigError(f"train.betas = {self.betas!r} must be two numbers in [0, 1)")
        self.betas = (float(betas[0]), float(betas[1]))
        if self.grad_clip is not None and not (
            isinstance(self.grad_clip, (int, float)) and self.grad_clip > 0
        ):
            raise ConfigError(f"train.grad_clip = {self.grad_clip!r} must be > 0 or unset")
        if self.lr_schedule not in ("constant", "cosine"):
            raise ConfigError(
                f"train.lr_schedule = {self.lr_schedule!r}: allowed 'constant' or 'cosine'"
            )
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ConfigError(
                f"train.device = {self.device!r}: allowed 'auto', 'cpu', 'cuda' or 'cuda:N'"
            )


@dataclass
class RunConfig:
    """One training run: task, model, training, and the seed that fixes all randomness."""

    name: str = "paper"
    seed: int = 0
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    kind: Literal["run"] = "run"

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed = {self.seed!r} must be an integer >= 0")
        if not self.name or "/" in self.name:
            raise ConfigError(f"name = {self.name!r} must be a non-empty name without '/'")
        self.built_model_config()  # a model size that conflicts with the task is an error

    def built_model_config(self) -> ModelConfig:
        """The model config with its vocabulary and context sizes filled in from the task."""
        return self.model.with_task(self.task.p, self.task.K, self.task.L)


def load_run_config(path=None, overrides: list[str] | None = None) -> RunConfig:
    """RunConfig defaults, then the TOML/JSON file at `path`, then dotted overrides."""
    return load_config(RunConfig, path, overrides)
