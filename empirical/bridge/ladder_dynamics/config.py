"""`DynamicsConfig`: the dynamics ladder's settings (configs/ladder_dynamics.toml; docs/ladder.md,
"The dynamics ladder"); a bad value is a `ConfigError` naming the field. `sgd.lr_qk` moves the
theorem's W by exactly -lr_qk dL/dW per step, `sgd.lr` every released piece; AdamW's rates are
the optimiser's own on the stored W_Q (W moves about lr_qk / sqrt(d_head) per step).
"""

from __future__ import annotations

from dataclasses import field

from disentangled.config import OPERAND_ORDERS
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.config.field_types import COLON, choice, integer, number
from empirical.config.io import ConfigError, config_class, field_paths

# the releases, in the order the cumulative ladder adds them (variants.py says what each is)
RELEASES = ("ov", "mlp", "layer1", "embeddings", "adamw", "mix", "task")


def count(low: int):
    """An integer >= low: "{field}: must be an integer >= low, got v"."""
    return integer(low, wording=COLON)


def rate(allow_zero: bool = False):
    """A finite number > 0 (>= 0): "{field}: must be a finite number > 0, got v"."""
    bound = ">= 0" if allow_zero else "> 0"
    return number(0, None, lo_open=not allow_zero, message=f"must be a finite number {bound}",
                  wording=COLON)  # fmt: skip


def order_choice():
    return choice(*OPERAND_ORDERS, wording=COLON)


@config_class("theorem")
class TheoremSection:
    """The theorem's instance (docs/theorem_model.md): modulus, variables, W^0's scale,
    length, 1-var operand order of the baseline's data, logit scale xi."""

    p: count(3) = 5
    K: count(2) = 3
    beta: number(message="must be a finite number", wording=COLON) = 4.0
    L: count(8) = 16
    operand_order: order_choice() = "fixed"
    xi: rate() = 10.0

    def __post_init__(self) -> None:
        if 2 * self.K > self.L - 4:
            raise ConfigError(
                f"theorem.K: {self.K} variables need 2K = {2 * self.K} assignment positions, "
                f"but L = {self.L} has only L - 4 = {self.L - 4}"
            )

    def model_config(self, operand_order: str | None = None) -> TheoremModelConfig:
        return TheoremModelConfig(
            p=self.p, K=self.K, beta=self.beta, L=self.L, xi=self.xi,
            operand_order=operand_order or self.operand_order,
        )  # fmt: skip


@config_class("sgd")
class SGDSection:
    """Plain SGD (no momentum, no decay): lr_qk on the theorem's W, lr on released pieces."""

    lr_qk: rate() = 0.2
    lr: rate() = 0.01


@config_class("adamw")
class AdamWSection:
    """torch.optim.AdamW of the `adamw` release (the authors' betas and weight decay)."""

    lr_qk: rate() = 0.05
    lr: rate() = 0.003
    weight_decay: rate(allow_zero=True) = 0.02
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])

    def __post_init__(self) -> None:
        b = self.betas
        if len(b) != 2 or not all(0 <= x < 1 for x in b):
            raise ConfigError(f"adamw.betas: must be two numbers in [0, 1), got {b!r}")


@config_class("mix")
class MixSection:
    """The `mix` release's training distribution: the authors' 0/1/2-var shares (their rows
    mix, 12/20/10 of 42, configs/authors.toml) and operand order."""

    frac_0var: rate(allow_zero=True) = 12 / 42
    frac_1var: rate(allow_zero=True) = 20 / 42
    frac_2var: rate(allow_zero=True) = 10 / 42
    operand_order: order_choice() = "mixed"

    def __post_init__(self) -> None:
        if self.frac_0var + self.frac_1var + self.frac_2var <= 0:
            raise ConfigError("mix: the three fractions sum to 0")


@config_class("task")
class TaskSection:
    """The `task` release: the authors' task rules on the training data (restrict.py).
    r1: variables never the first operand; r2: never the second (letters, as in
    configs/authors.toml); held_out_fraction: ordered operand-value pairs held out of
    training, chosen by held_out_seed."""

    r1: list[str] = field(default_factory=lambda: ["b"])
    r2: list[str] = field(default_factory=lambda: ["a"])
    held_out_fraction: float = 0.1
    held_out_seed: integer(0, wording=COLON) = 0

    def indices(self, K: int) -> tuple[list[int], list[int]]:
        return [ord(v) - ord("a") for v in self.r1], [ord(v) - ord("a") for v in self.r2]


@config_class()
class DynamicsConfig:
    """steps: SGD/AdamW steps per run; batch_size: sequences per step, drawn with replacement
    from the population by its weights (0: the whole population, weighted: the exact
    gradient); eval_every: steps between evaluations of the 2-var accuracy (whole 2-var
    population); threshold: the 2-var accuracy that counts as composing; seeds: the
    minibatch streams; releases: which releases the ladder runs (each alone and cumulatively
    in this order; empty: none, the baseline only); qk_factors: train layer 2's W_Q and W_K
    as two factors (W_K from I, at W_Q's rate) instead of W_Q alone (trainer.py);
    init_perturbation: a seeded perturbation of every trained tensor at the start, X + s
    RMS(X) Z with Z standard normal from the run's seed (0: every seed starts at the
    theorem's W^0 and the seeds differ in the minibatch order only; docs/race.md)."""

    name: str = "ladder_dynamics"
    steps: count(1) = 300
    batch_size: count(0) = 512
    eval_every: count(1) = 5
    threshold: number(0, 1, lo_open=True, message="must be in (0, 1]", wording=COLON) = 0.99
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    releases: list[str] = field(default_factory=lambda: list(RELEASES))
    threads: count(1) = 1
    qk_factors: bool = False
    init_perturbation: rate(allow_zero=True) = 0.0
    theorem: TheoremSection = field(default_factory=TheoremSection)
    sgd: SGDSection = field(default_factory=SGDSection)
    adamw: AdamWSection = field(default_factory=AdamWSection)
    mix: MixSection = field(default_factory=MixSection)
    task: TaskSection = field(default_factory=TaskSection)

    def __post_init__(self) -> None:
        """The lists and the sections together (each value alone is checked by its type)."""
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds: {self.seeds} repeats a seed")
        for name in self.releases:
            if name not in RELEASES:
                raise ConfigError(f"releases: {name!r} is not one of {list(RELEASES)}")
        if len(set(self.releases)) != len(self.releases):
            raise ConfigError(f"releases: {self.releases} repeats a release")
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

    def mix_weights(self) -> dict[str, float]:
        return {"0var": self.mix.frac_0var, "1var": self.mix.frac_1var,
                "2var": self.mix.frac_2var}  # fmt: skip


def dynamics_field(name: str) -> str | None:
    """The dotted DynamicsConfig field that flag name `name` (`steps`, `sgd.lr`, `eval-every`)
    names, or None: what an unknown flag of a command that takes its overrides may mean."""
    name = name.replace("-", "_")
    for path in field_paths(DynamicsConfig):
        if name in (path, path.rsplit(".", 1)[-1]):
            return path
    return None
