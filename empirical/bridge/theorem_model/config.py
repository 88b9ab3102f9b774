"""`TheoremModelConfig`: which instance of Theorem C.1's simplified model to build: the
theorem's parameters (../shared/spec/theorem_c1.md) p, K, beta, L, the 1-var operand order, the
logit scale xi, and the transformer's `routing_scale` (layer 1's score of a routed position;
the softmax leaks e^-routing_scale, below 1e-16 at 40: `routing_leak`).
"""

from __future__ import annotations

from disentangled.config import OPERAND_ORDERS, SimConfig
from disentangled.config import ConfigError as SimConfigError
from empirical.config.field_types import COLON, choice, integer, number
from empirical.config.io import ConfigError, config_class

# layer-1 score of a routed position; exp(-40) = 4.2e-18 of weight per other position
DEFAULT_ROUTING_SCALE = 40.0


def real(positive: bool = False):
    """A finite number ("{field}: must be a finite number, got v"), > 0 if `positive`."""
    return number(0 if positive else None, None, lo_open=True, wording=COLON,
                  message="must be > 0" if positive else "must be a finite number",
                  type_message="must be a finite number")  # fmt: skip


@config_class("theorem_model", frozen=True)
class TheoremModelConfig:
    """p: modulus (p >= 3); K: variables, each assigned once (2 <= K, 2K <= L-4); beta: scale
    of W^0; L: sequence length (>= 8); operand_order: 1-var operand order, "fixed" (number at
    L-3, variable at L-2), "swapped" or "mixed" (both, weight 1/2); xi: the logit scale
    (> 0; the first-order loss divides it out); routing_scale: layer-1 score of a routed
    position (> 0; see the module docstring)."""

    p: integer(3, wording=COLON) = 5
    K: integer(2, wording=COLON) = 3
    beta: real() = 4.0
    L: integer(8, wording=COLON) = 16
    operand_order: choice(*OPERAND_ORDERS, wording=COLON) = "fixed"
    xi: real(positive=True) = 1.0
    routing_scale: real(positive=True) = DEFAULT_ROUTING_SCALE

    def __post_init__(self) -> None:
        # the theorem's parameters together are disentangled's SimConfig, checked there (one
        # set of rules), its errors named as this config's fields
        try:
            self.sim_config()
        except SimConfigError as exc:
            message = f"theorem_model.{exc.field}: {exc.message}, got {exc.value!r}"
            raise ConfigError(message) from None

    def sim_config(self) -> SimConfig:
        """The same instance as `disentangled`'s SimConfig (its population and gradients)."""
        return SimConfig(p=self.p, K=self.K, beta=self.beta, L=self.L,
                         operand_order=self.operand_order)  # fmt: skip
