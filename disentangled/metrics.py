"""Population accuracy and attention statistics (exact weighted sums, no sampling).

Predictions are argmax_y F_y(h); since f = xi F with xi > 0 they do not depend on xi.
A sequence counts as correct only if its label is the *unique* argmax:
F_{y*} - max_{y != y*} F_y > tol * max_y |F_y| (relative tolerance, default 1e-9), so ties
(e.g. at W^0, where every assignment's sum scores the same) count as wrong.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .config import ChainConfig, SimConfig
from .fast import ORTHOGONAL, Geometry, chunk_forward, forward_hops
from .population import DEFAULT_CHUNK, available_kinds, iter_compact, whole_population

TIE_TOL = 1e-9


def unique_argmax_correct(F: torch.Tensor, labels: torch.Tensor, tol: float = TIE_TOL):
    """Bool (N,): the label is the unique argmax of F up to the relative tolerance."""
    correct = F.gather(1, labels[:, None])[:, 0]
    others = F.scatter(1, labels[:, None], float("-inf")).max(dim=1).values
    scale = F.abs().max(dim=1).values
    return (correct - others) > tol * scale


@dataclass
class PopulationStats:
    """accuracy: weight of uniquely-correct sequences; bound_mass: mean attention on the
    assignment number slots bound to the queried variables; operand_number_mass: mean
    attention on operand positions holding a number; loss_first_order: E[mean F - F_y*]."""

    accuracy: float
    bound_mass: float
    operand_number_mass: float
    loss_first_order: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@torch.no_grad()
def population_stats(
    W: torch.Tensor,
    cfg: SimConfig,
    kind: str,
    geometry: Geometry = ORTHOGONAL,
    tol: float = TIE_TOL,
    chunk_size: int = DEFAULT_CHUNK,
) -> PopulationStats:
    acc = bound = opn = first = 0.0
    for chunk in iter_compact(cfg, kind, chunk_size):
        sigma, F = chunk_forward(W, chunk, cfg, geometry)
        w = chunk.weights
        acc += float((w * unique_argmax_correct(F, chunk.labels, tol)).sum())
        bound += float((w * (sigma * chunk.bound).sum(1)).sum())
        opn += float((w * (sigma * chunk.operand_number).sum(1)).sum())
        f = F.mean(1) - F.gather(1, chunk.labels[:, None])[:, 0]
        first += float((w * f).sum())
    return PopulationStats(acc, bound, opn, first)


def population_accuracy(
    W: torch.Tensor, cfg: SimConfig, kind: str, geometry: Geometry = ORTHOGONAL, tol=TIE_TOL
) -> float:
    return population_stats(W, cfg, kind, geometry, tol).accuracy


@torch.no_grad()
def hop_stats(
    weights: tuple[torch.Tensor, ...], cfg: SimConfig | ChainConfig
) -> dict[str, dict[str, float]]:
    """Per kind (whole populations, one matrix per hop): accuracy, the last layer's attention
    mass on the number slots the query resolves to (``bound_mass``) and, with two hops, the
    middle layer's mass on the right-hand side of a queried pointer (``pointer_mass``)."""
    out = {}
    for kind in available_kinds(cfg):
        chunk = whole_population(cfg, kind)
        sigmas, F = forward_hops(weights, chunk, cfg)
        w = chunk.weights
        out[kind] = {
            "accuracy": float((w * unique_argmax_correct(F, chunk.labels)).sum()),
            "bound_mass": float((w * (sigmas[-1] * chunk.bound).sum(1)).sum()),
        }
        if len(sigmas) > 1:
            out[kind]["pointer_mass"] = float((w * (sigmas[0] * chunk.pointer_rhs).sum(1)).sum())
    return out
