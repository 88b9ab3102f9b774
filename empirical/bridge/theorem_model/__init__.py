"""Theorem C.1's simplified model as a real `AssignAddTransformer` (float64), its population
as token sequences, and its layer-2 key-query gradients by autograd. See docs/theorem_model.md.

    cfg = TheoremModelConfig(p=5, K=3, beta=4.0, xi=10.0)
    loss, G = theorem_gradient(build_theorem_model(cfg), theorem_population(cfg, "1var"),
                               Layout(cfg).dim)     # dL/dW in the theorem's basis
"""

from disentangled.model import fourier_mlp_weights
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.construct import (
    build_theorem_model,
    model_config,
    routing_leak,
    routing_targets,
    score_matrix,
    set_score_matrix,
)
from empirical.bridge.theorem_model.coords import theorem_coordinates
from empirical.bridge.theorem_model.gradient import (
    gradient_descent,
    merged_gradient,
    model_g1,
    per_sequence_loss,
    population_accuracy,
    theorem_gradient,
)
from empirical.bridge.theorem_model.layout import Layout
from empirical.bridge.theorem_model.pieces import (
    compare_pieces,
    layer1_mask,
    model_piece_gradients,
    model_pieces,
)
from empirical.bridge.theorem_model.token_population import (
    TokenPopulation,
    augmented_inputs,
    theorem_population,
)

__all__ = [
    "Layout",
    "TheoremModelConfig",
    "TokenPopulation",
    "augmented_inputs",
    "build_theorem_model",
    "compare_pieces",
    "fourier_mlp_weights",
    "gradient_descent",
    "layer1_mask",
    "merged_gradient",
    "model_config",
    "model_g1",
    "model_piece_gradients",
    "model_pieces",
    "per_sequence_loss",
    "population_accuracy",
    "routing_leak",
    "routing_targets",
    "score_matrix",
    "set_score_matrix",
    "theorem_gradient",
    "theorem_coordinates",
    "theorem_population",
]
