"""`TheoremModelConfig`: which instance of Theorem C.1's simplified model to build.

The theorem's parameters (../shared/spec/theorem_c1.md): modulus p, K variables (each
assigned once), the scale beta of W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T, the length L, the
1-var operand order, and xi, the logit scale of f = xi F. One more number belongs to the
transformer only: `routing_scale`, the layer-1 attention score of a routed position (the
others score 0), which makes layer 1's softmax leak e^-routing_scale of its weight; 40 keeps
the leak below 1e-16 (`routing_leak`), far below the 1e-13 the tests ask for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from disentangled.config import ConfigError as SimConfigError
from disentangled.config import SimConfig
from empirical.config_io import ConfigError

# layer-1 score of a routed position; exp(-40) = 4.2e-18 of weight per other position
DEFAULT_ROUTING_SCALE = 40.0


def _real(name: str, value: object, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"theorem_model.{name}: must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"theorem_model.{name}: must be > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class TheoremModelConfig:
    """p: modulus (p >= 3); K: variables, each assigned once (2 <= K, 2K <= L-4); beta: scale
    of W^0; L: sequence length (>= 8); operand_order: 1-var operand order, "fixed" (number at
    L-3, variable at L-2), "swapped" or "mixed" (both, weight 1/2); xi: the logit scale
    (> 0; the first-order loss divides it out); routing_scale: layer-1 score of a routed
    position (> 0; see the module docstring)."""

    p: int = 5
    K: int = 3
    beta: float = 4.0
    L: int = 16
    operand_order: str = "fixed"
    xi: float = 1.0
    routing_scale: float = DEFAULT_ROUTING_SCALE

    def __post_init__(self) -> None:
        # the theorem's own parameters are disentangled's SimConfig, checked there (one set
        # of rules), their errors named as this config's fields
        _real("beta", self.beta, positive=False)
        try:
            sim = self.sim_config()
        except SimConfigError as exc:
            message = f"theorem_model.{exc.field}: {exc.message}, got {exc.value!r}"
            raise ConfigError(message) from None
        object.__setattr__(self, "beta", sim.beta)
        object.__setattr__(self, "xi", _real("xi", self.xi, positive=True))
        scale = _real("routing_scale", self.routing_scale, positive=True)
        object.__setattr__(self, "routing_scale", scale)

    def sim_config(self) -> SimConfig:
        """The same instance as `disentangled`'s SimConfig (its population and gradients)."""
        return SimConfig(p=self.p, K=self.K, beta=self.beta, L=self.L,
                         operand_order=self.operand_order)  # fmt: skip
