"""`DynamicsConfig`: the dynamics ladder's settings (configs/ladder_dynamics.toml).

The theorem's instance (p, K, beta, L, xi, as `TheoremModelConfig`), the training schedule
shared by every variant (steps, minibatch, evaluation cadence), the two optimisers (plain SGD
of the baseline, AdamW of the `adamw` release), the authors' 0/1/2-var mix of the `mix`
release, and which releases the ladder runs. Every bad value is a `ConfigError` naming the
field (the CLI prints it as one `error:` line, exit 2).

Step sizes. `sgd.lr_qk` is the step on the theorem's score matrix W itself, the simulator's
unit: one SGD step moves W by exactly -lr_qk dL/dW (the trainer scales the optimiser's rate on
the stored layer-2 W_Q by d_head, see `trainer.py`). `sgd.lr` is the plain rate of every
released piece. AdamW's rates are the optimiser's own, `adamw.lr_qk` on the stored W_Q
(W moves by about lr_qk / sqrt(d_head) per step), `adamw.lr` on the released pieces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from disentangled.config import OPERAND_ORDERS
from empirical.config_io import ConfigError

if TYPE_CHECKING:  # the theorem's model (and torch) only when a model is built
    from empirical.theorem_model import TheoremModelConfig

# the releases, in the order the cumulative ladder adds them (variants.py says what each is)
RELEASES = ("ov", "mlp", "layer1", "embeddings", "adamw", "mix", "task")


def _check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name}: must be a finite number {bound}, got {value!r}")


def _check_int(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")


@dataclass
class TheoremSection:
    """The theorem's instance (docs/theorem_model.md): modulus, variables, W^0's scale,
    length, 1-var operand order of the baseline's data, logit scale xi."""

    p: int = 5
    K: int = 3
    beta: float = 4.0
    L: int = 16
    operand_order: str = "fixed"
    xi: float = 10.0

    def model_config(self, operand_order: str | None = None) -> TheoremModelConfig:
        from empirical.theorem_model.config import TheoremModelConfig

        return TheoremModelConfig(
            p=self.p, K=self.K, beta=self.beta, L=self.L, xi=self.xi,
            operand_order=operand_order or self.operand_order,
        )  # fmt: skip


@dataclass
class SGDSection:
    """Plain SGD (no momentum, no decay): lr_qk on the theorem's W, lr on released pieces."""

    lr_qk: float = 0.2
    lr: float = 0.01


@dataclass
class AdamWSection:
    """torch.optim.AdamW of the `adamw` release (the authors' betas and weight decay)."""

    lr_qk: float = 0.05
    lr: float = 0.003
    weight_decay: float = 0.02
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])


@dataclass
class MixSection:
    """The `mix` release's training distribution: the authors' 0/1/2-var shares (their rows
    mix, 12/20/10 of 42, configs/authors.toml) and operand order."""

    frac_0var: float = 12 / 42
    frac_1var: float = 20 / 42
    frac_2var: float = 10 / 42
    operand_order: str = "mixed"


@dataclass
class TaskSection:
    """The `task` release: the authors' task rules on the training data (restrict.py).
    r1: variables never the first operand; r2: never the second (letters, as in
    configs/authors.toml); held_out_fraction: ordered operand-value pairs held out of
    training, chosen by held_out_seed."""

    r1: list[str] = field(default_factory=lambda: ["b"])
    r2: list[str] = field(default_factory=lambda: ["a"])
    held_out_fraction: float = 0.1
    held_out_seed: int = 0

    def indices(self, K: int) -> tuple[list[int], list[int]]:
        return [ord(v) - ord("a") for v in self.r1], [ord(v) - ord("a") for v in self.r2]


@dataclass
class DynamicsConfig:
    """steps: SGD/AdamW steps per run; batch_size: sequences per step, drawn with replacement
    from the population by its weights (0: the whole population, weighted: the exact
    gradient); eval_every: steps between evaluations of the 2-var accuracy (whole 2-var
    population); threshold: the 2-var accuracy that counts as composing; seeds: the
    minibatch streams; releases: which releases the ladder runs (each alone and cumulatively
    in this order; empty: none, the baseline only)."""

    name: str = "ladder_dynamics"
    steps: int = 300
    batch_size: int = 512
    eval_every: int = 5
    threshold: float = 0.99
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    releases: list[str] = field(default_factory=lambda: list(RELEASES))
    threads: int = 1
    theorem: TheoremSection = field(default_factory=TheoremSection)
    sgd: SGDSection = field(default_factory=SGDSection)
    adamw: AdamWSection = field(default_factory=AdamWSection)
    mix: MixSection = field(default_factory=MixSection)
    task: TaskSection = field(default_factory=TaskSection)

    def __post_init__(self) -> None:
        _check_int("steps", self.steps, 1)
        _check_int("batch_size", self.batch_size, 0)
        _check_int("eval_every", self.eval_every, 1)
        _check_int("threads", self.threads, 1)
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"threshold: must be in (0, 1], got {self.threshold!r}")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds: {self.seeds} repeats a seed")
        for name in self.releases:
            if name not in RELEASES:
                raise ConfigError(f"releases: {name!r} is not one of {list(RELEASES)}")
        if len(set(self.releases)) != len(self.releases):
            raise ConfigError(f"releases: {self.releases} repeats a release")
        for sec, names in ((self.sgd, ("lr_qk", "lr")), (self.adamw, ("lr_qk", "lr"))):
            prefix = "sgd" if sec is self.sgd else "adamw"
            for n in names:
                _check_positive(f"{prefix}.{n}", getattr(sec, n))
        _check_positive("adamw.weight_decay", self.adamw.weight_decay, allow_zero=True)
        b = self.adamw.betas
        if len(b) != 2 or not all(0 <= x < 1 for x in b):
            raise ConfigError(f"adamw.betas: must be two numbers in [0, 1), got {b!r}")
        fr = (self.mix.frac_0var, self.mix.frac_1var, self.mix.frac_2var)
        for n, v in zip(("frac_0var", "frac_1var", "frac_2var"), fr, strict=True):
            _check_positive(f"mix.{n}", v, allow_zero=True)
        if sum(fr) <= 0:
            raise ConfigError("mix: the three fractions sum to 0")
        self._check_theorem()
        self._check_task()

    def _check_task(self) -> None:
        """The task section's values, where the `task` release is run (its default variables
        need K >= 3)."""
        if "task" not in self.releases:
            return
        K, t = self.theorem.K, self.task
        allowed = [chr(ord("a") + i) for i in range(K)]
        for name in ("r1", "r2"):
            for v in getattr(t, name):
                if v not in allowed:
                    raise ConfigError(f"task.{name}: {v!r} is not a variable of K = {K}: "
                                      f"one of {allowed}")  # fmt: skip
        if not 0 <= t.held_out_fraction < 1:
            raise ConfigError(
                f"task.held_out_fraction: must be in [0, 1), got {t.held_out_fraction!r}"
            )

    def _check_theorem(self) -> None:
        """TheoremModelConfig's checks, without importing the model (nor torch): a bad value
        fails before any computation, under this config's field names."""
        th = self.theorem
        for name, low in (("p", 3), ("K", 2), ("L", 8)):
            _check_int(f"theorem.{name}", getattr(th, name), low)
        if 2 * th.K > th.L - 4:
            raise ConfigError(
                f"theorem.K: {th.K} variables need 2K = {2 * th.K} assignment positions, "
                f"but L = {th.L} has only L - 4 = {th.L - 4}"
            )
        if not math.isfinite(th.beta):
            raise ConfigError(f"theorem.beta: must be a finite number, got {th.beta!r}")
        _check_positive("theorem.xi", th.xi)
        for where, order in (("theorem", th.operand_order), ("mix", self.mix.operand_order)):
            if order not in OPERAND_ORDERS:
                raise ConfigError(
                    f"{where}.operand_order: {order!r} is not one of {list(OPERAND_ORDERS)}"
                )

    def mix_weights(self) -> dict[str, float]:
        return {"0var": self.mix.frac_0var, "1var": self.mix.frac_1var,
                "2var": self.mix.frac_2var}  # fmt: skip
