"""Configuration of the simplified (disentangled) model of Theorem C.1.

The defaults follow ../shared/spec/theorem_c1.md: L = 16 positions, of which
``0 .. L-5`` hold the K assignments (slot pairs) and padding, ``L-4`` holds ``+``,
``L-3`` and ``L-2`` the operands and ``T = L-1`` the query token ``=``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OPERAND_ORDERS = ("fixed", "swapped", "mixed")


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


@dataclass(frozen=True)
class SimConfig(SequenceLayout):
    """Parameters of the population of Theorem C.1.

    p: modulus (numbers are Z_p), K: number of variables (each assigned once),
    beta: scale of the initial key-query matrix W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T,
    L: sequence length, operand_order: for 1-var sequences, "fixed" puts the number at
    L-3 and the variable at L-2 (eq. (1)), "swapped" the reverse, "mixed" both with weight 1/2.
    """

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
        try:
            beta = float(self.beta)
        except (TypeError, ValueError):
            raise ConfigError("beta", self.beta, "must be a real number") from None
        if not math.isfinite(beta):
            raise ConfigError("beta", self.beta, "must be finite")
        object.__setattr__(self, "beta", beta)
        if self.operand_order not in OPERAND_ORDERS:
            raise ConfigError(
                "operand_order", self.operand_order, f"must be one of {', '.join(OPERAND_ORDERS)}"
            )
