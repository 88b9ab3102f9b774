"""Theorem C.1's simplified model as a real `AssignAddTransformer` (float64), its population
as token sequences, and its layer-2 key-query gradients by autograd. See docs/theorem_model.md.

    from empirical.bridge.theorem_model.config import TheoremModelConfig
    from empirical.bridge.theorem_model.construct import build_theorem_model
    from empirical.bridge.theorem_model.gradient import theorem_gradient
    from empirical.bridge.theorem_model.layout import Layout
    from empirical.bridge.theorem_model.token_population import theorem_population
    cfg = TheoremModelConfig(p=5, K=3, beta=4.0, xi=10.0)
    loss, G = theorem_gradient(build_theorem_model(cfg), theorem_population(cfg, "1var"),
                               Layout(cfg).dim)     # dL/dW in the theorem's basis

Modules: config (`TheoremModelConfig`; no torch), layout (`Layout`), construct (the weights:
`build_theorem_model`, `model_config`, `routing_leak`, `routing_targets`, `score_matrix`,
`set_score_matrix`; the model in compare-qk's coordinates: `theorem_coordinates`),
token_population (`TokenPopulation`, `theorem_population`, `augmented_inputs`), gradient
(`theorem_gradient`, `merged_gradient`, `model_g1`, `per_sequence_loss`, `population_accuracy`,
`gradient_descent`), pieces (`model_pieces`, `model_piece_gradients`, `compare_pieces`,
`layer1_mask`).
"""

__all__ = ["config", "construct", "gradient", "layout", "pieces", "token_population"]
