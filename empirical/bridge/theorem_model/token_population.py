"""The theorem's population as token sequences of empirical.task's vocabulary: theorem_c1.md's
population, sequence for sequence as `disentangled.population` enumerates it (every K
variables assigned once, in any slot order, values uniform; 1-var in the config's operand
order, 2-var, 0-var), written as token ids in `layout.py`'s sequence order. The ebar parts of
the augmented inputs are written by the model's layer 1 (`augmented_inputs`: what it must
write). docs/theorem_model.md, "The population as token sequences".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from disentangled.gradient import mixture
from disentangled.population import compact_slice, population_size, to_dense
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.layout import Layout

Kind = str | Mapping[str, float]


@dataclass
class TokenPopulation:
    """tokens (N, L) long in sequence order, labels (N,) long, weights (N,) float64 (sum 1
    over the whole population, mixture weights included), kinds (N,) long: 0/1/2 variables."""

    tokens: Tensor
    labels: Tensor
    weights: Tensor
    kinds: Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]

    def chunks(self, size: int):
        """(tokens, labels, weights) slices of at most `size` sequences."""
        for start in range(0, len(self), size):
            stop = start + size
            yield self.tokens[start:stop], self.labels[start:stop], self.weights[start:stop]


def theorem_population(cfg: TheoremModelConfig, kind: Kind = "1var") -> TokenPopulation:
    """The whole population of `kind` ("0var", "1var", "2var" or {kind: weight}) as token
    sequences (module docstring)."""
    lay = Layout(cfg)
    sim = cfg.sim_config()
    parts = []
    for k, weight in mixture(kind):
        chunk = compact_slice(sim, k, 0, population_size(sim, k))
        n_vars = {"0var": 0, "1var": 1, "2var": 2}[k]
        parts.append(
            TokenPopulation(
                tokens=lay.to_sequences(chunk.tok),
                labels=chunk.labels,
                weights=chunk.weights * weight,
                kinds=torch.full_like(chunk.labels, n_vars),
            )
        )
    return TokenPopulation(*(torch.cat([getattr(x, f) for x in parts]) for f in
                             ("tokens", "labels", "weights", "kinds")))  # fmt: skip


def augmented_inputs(cfg: TheoremModelConfig, kind: str, start: int, stop: int) -> Tensor:
    """The theorem's augmented inputs x_t (eq. 1) of sequences start..stop-1 of `kind`, in
    sequence order and residual coordinates: (N, L, d_model), zero outside the basis block."""
    lay = Layout(cfg)
    sim = cfg.sim_config()
    dense = to_dense(compact_slice(sim, kind, start, stop), sim)[:, lay.theorem_position]
    out = torch.zeros((*dense.shape[:2], lay.d_model), dtype=torch.float64)
    out[..., : lay.dim] = dense
    return out
