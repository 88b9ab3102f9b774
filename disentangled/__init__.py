"""Numeric side of the paper's Appendix C model (Theorem C.1): a one-layer attention model
on augmented inputs with orthogonal ("disentangled") embeddings and a Fourier MLP; with a
``ChainConfig`` (two hops), the chain model of ../shared/spec/chain.md, a middle attention
layer before it.

See docs/disentangled.md and ../shared/spec/theorem_c1.md (beside the repository).

The public names below are imported on first use (disentangled.lazy_exports): importing the
package, or its torch-free modules (`command_line`, `config`), does not import torch.
"""

from disentangled.lazy_exports import lazy_exports

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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "disentangled.basis": ["Basis"],
        "disentangled.config": ["ConfigError", "SimConfig"],
        "disentangled.gradient": [
            "first_order_term",
            "g1",
            "population_gradient",
            "population_loss",
            "remainder",
        ],
        "disentangled.model": ["attention", "forward", "fourier_mlp", "initial_W"],
        "disentangled.population": [
            "PopulationChunk",
            "brute_force_population",
            "iter_population",
            "population_size",
        ],
    },
)
