"""Numeric side of the paper's Appendix C model (Theorem C.1): a one-layer attention model
on augmented inputs with orthogonal ("disentangled") embeddings and a Fourier MLP.

See docs/disentangled.md and ../shared/spec/theorem_c1.md (beside the repository).
"""

from .basis import Basis
from .config import ConfigError, SimConfig
from .gradient import first_order_term, g1, population_gradient, population_loss, remainder
from .model import attention, forward, fourier_mlp, initial_W
from .population import (
    PopulationChunk,
    brute_force_population,
    iter_population,
    population_size,
)

__all__ = [
    "Basis",
    "ConfigError",
    "PopulationChunk",
    "SimConfig",
    "attention",
    "brute_force_population",
    "first_order_term",
    "forward",
    "fourier_mlp",
    "g1",
    "initial_W",
    "iter_population",
    "population_gradient",
    "population_loss",
    "population_size",
    "remainder",
]
