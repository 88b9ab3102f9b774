"""Configuration of the simplified (disentangled) model, by number of hops.

``SimConfig`` (hops = 1) is Theorem C.1's model (../shared/spec/theorem_c1.md); ``ChainConfig``
(hops = 2) the two-hop chain model (../shared/spec/chain.md): a middle attention layer (W2)
before C.1's layer (W3), and ``pointers`` variables bound to another variable.  Both share the
layout: L = 16 positions by default, of which ``0 .. L-5`` hold the K assignments (slot pairs)
and padding, ``L-4`` holds ``+``, ``L-3`` and ``L-2`` the operands and ``T = L-1`` the query
token ``=``.  With ``pointers = 0`` the chain's populations are exactly C.1's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

OPERAND_ORDERS = ("fixed", "swapped", "mixed")
KINDS = ("0var", "1var", "2var")
"""C.1's populations: 0, 1 or 2 variable operands."""
CHAIN_KINDS = ("0var", "1var-1hop", "1var-2hop", "2var-1hop", "2var-2hop")
"""The chain's evaluation sets: variable operands, and largest hop count among them (2var-2hop:
at least one operand is a pointer).  With no pointers 1var-1hop is C.1's 1var, 2var-1hop its
2var."""


class ConfigError(ValueError):
    """A bad configuration value; ``field`` names the offending field."""

    def __init__(self, field: str, value: object, message: str):
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}={value!r}: {message}")


class SequenceLayout:
    """The positions of a length-L sequence of C.1's layout (assignments in 0 .. L-5, `+` at
    L-4, the operands at L-3 and L-2, `=` at L-1), for a config with a field `L`."""

    L: int

    @property
    def T(self) -> int:
        """Query position (the ``=`` token)."""
        return self.L - 1

    @property
    def plus_pos(self) -> int:
        return self.L - 4

    @property
    def operand_pos(self) -> tuple[int, int]:
        """The two operand positions (L-3, L-2); 13 and 14 for L = 16."""
        return (self.L - 3, self.L - 2)

    @property
    def n_assign_positions(self) -> int:
        """Size of the assignment region 0 .. L-5."""
        return self.L - 4


def _check_order(value: object) -> None:
    if value not in OPERAND_ORDERS:
        raise ConfigError("operand_order", value, f"must be one of {', '.join(OPERAND_ORDERS)}")


def _number(name: str, value: object, allow_bool: bool = False) -> float:
    """`value` as a finite float, else a ConfigError naming `name`."""
    if isinstance(value, bool) and not allow_bool:
        raise ConfigError(name, value, "must be a real number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, "must be a real number") from None
    if not math.isfinite(out):
        raise ConfigError(name, value, "must be finite")
    return out


@dataclass(frozen=True)
class SimConfig(SequenceLayout):
    """Parameters of the population of Theorem C.1 (one hop, no pointers).

    p: modulus (numbers are Z_p), K: number of variables (each assigned once),
    beta: scale of the initial key-query matrix W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T,
    L: sequence length, operand_order: for 1-var sequences, "fixed" puts the number at
    L-3 and the variable at L-2 (eq. (1)), "swapped" the reverse, "mixed" both with weight 1/2.
    """

    hops: ClassVar[int] = 1
    pointers: ClassVar[int] = 0
    kinds: ClassVar[tuple[str, ...]] = KINDS

    p: int = 5
    K: int = 3
    beta: float = 4.0
    L: int = 16
    operand_order: str = "fixed"

    def __post_init__(self) -> None:
        for name in ("p", "K", "L"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, value, "must be an integer")
        if self.L < 8:
            raise ConfigError("L", self.L, "must be >= 8")
        if self.p < 3:
            raise ConfigError("p", self.p, "must be >= 3")
        if self.K < 2:
            raise ConfigError("K", self.K, "must be >= 2")
        if 2 * self.K > self.L - 4:
            raise ConfigError(
                "K", self.K, f"2K must be <= {self.L - 4} (assignment region, L-4 with L={self.L})"
            )
        object.__setattr__(self, "beta", _number("beta", self.beta, allow_bool=True))
        _check_order(self.operand_order)

    def training_mix(self) -> dict[str, float]:
        """The theorem's training data: 1-var sequences."""
        return {"1var": 1.0}


@dataclass(frozen=True)
class ChainConfig(SequenceLayout):
    """Parameters of the two-hop chain populations and of the training mixture.

    p, K, beta, L, operand_order: as in ``SimConfig`` (W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T
    for both key-query matrices W2 and W3).  pointers: number of pointer variables,
    0 <= pointers <= K - 1; every pointer's target is a number-bound variable (all choices
    of pointer set and targets enumerated).  mix_0var, mix_1var, mix_2var: weights of the
    0/1/2-variable sequences in the training mixture (>= 0, positive sum).  hop1_share: the
    share of 1-hop sequences among the 1var and 2var ones (in [0, 1]; the rest is 2-hop).
    """

    hops: ClassVar[int] = 2
    kinds: ClassVar[tuple[str, ...]] = CHAIN_KINDS

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
        _check_order(self.operand_order)
        object.__setattr__(self, "beta", self.sim_config().beta)  # validates p, K, L, beta
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
