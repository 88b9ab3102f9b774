"""Configuration of the two-hop disentangled chain model (../shared/spec/chain.md).

K variables, each assigned exactly once: ``pointers`` of them are bound to another
variable (``u=w``, a pointer, w always bound to a number), the other K - pointers to
numbers.  The layout is C.1's (``config.SimConfig``): slot pairs (2j, 2j+1) in
0..L-5, ``+`` at L-4, operands at L-3, L-2, the query at T = L-1.  With ``pointers=0`` the
populations are exactly those of Theorem C.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import OPERAND_ORDERS, ConfigError, SequenceLayout, SimConfig

CHAIN_KINDS = ("0var", "1var-1hop", "1var-2hop", "2var-1hop", "2var-2hop")
"""Evaluation sets: variable operands, and largest hop count among them (2var-2hop: at
least one operand is a pointer)."""


def _number(name: str, value: object) -> float:
    if isinstance(value, bool):
        raise ConfigError(name, value, "must be a real number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, "must be a real number") from None
    if not math.isfinite(out):
        raise ConfigError(name, value, "must be finite")
    return out


@dataclass(frozen=True)
class ChainConfig(SequenceLayout):
    """Parameters of the chain populations and of the training mixture.

    p, K, beta, L, operand_order: as in ``SimConfig`` (W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T
    for both key-query matrices W2 and W3).  pointers: number of pointer variables,
    0 <= pointers <= K - 1; every pointer's target is a number-bound variable (all choices
    of pointer set and targets enumerated).  mix_0var, mix_1var, mix_2var: weights of the
    0/1/2-variable sequences in the training mixture (>= 0, positive sum).  hop1_share: the
    share of 1-hop sequences among the 1var and 2var ones (in [0, 1]; the rest is 2-hop).
    """

    p: int = 5
    K: int = 3
    pointers: int = 1
    beta: float = 4.0
    L: int = 16
    operand_order: str = "fixed"
    mix_0var: float = 0.0
    mix_1var: float = 1.0
    mix_2var: float = 0.0
    hop1_share: float = 0.5

    def __post_init__(self) -> None:
        base = self.sim_config()  # validates p, K, L, beta, operand_order
        object.__setattr__(self, "beta", base.beta)
        if isinstance(self.pointers, bool) or not isinstance(self.pointers, int):
            raise ConfigError("pointers", self.pointers, "must be an integer")
        if not 0 <= self.pointers <= self.K - 1:
            raise ConfigError(
                "pointers",
                self.pointers,
                f"must be in 0..K-1 = 0..{self.K - 1} (at least one variable is bound to a number)",
            )
        for name in ("mix_0var", "mix_1var", "mix_2var", "hop1_share"):
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        for name in ("mix_0var", "mix_1var", "mix_2var"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "must be >= 0")
        if self.mix_0var + self.mix_1var + self.mix_2var <= 0:
            raise ConfigError("mix_1var", self.mix_1var, "the mix weights must have a positive sum")
        if not 0.0 <= self.hop1_share <= 1.0:
            raise ConfigError("hop1_share", self.hop1_share, "must be in [0, 1]")
        if self.pointers == 0 and self.hop1_share < 1.0 and self.mix_1var + self.mix_2var > 0:
            raise ConfigError(
                "hop1_share", self.hop1_share, "must be 1 when pointers=0 (no 2-hop sequences)"
            )

    def sim_config(self) -> SimConfig:
        """The C.1 configuration with the same p, K, beta, L and operand order."""
        if self.operand_order not in OPERAND_ORDERS:
            raise ConfigError(
                "operand_order", self.operand_order, f"must be one of {', '.join(OPERAND_ORDERS)}"
            )
        return SimConfig(
            p=self.p, K=self.K, beta=self.beta, L=self.L, operand_order=self.operand_order
        )

    def training_mix(self) -> dict[str, float]:
        """{kind: weight} of the training mixture (zero weights dropped; sums to 1)."""
        s = self.hop1_share
        raw = {
            "0var": self.mix_0var,
            "1var-1hop": self.mix_1var * s,
            "1var-2hop": self.mix_1var * (1 - s),
            "2var-1hop": self.mix_2var * s,
            "2var-2hop": self.mix_2var * (1 - s),
        }
        total = sum(raw.values())
        return {k: w / total for k, w in raw.items() if w > 0}
