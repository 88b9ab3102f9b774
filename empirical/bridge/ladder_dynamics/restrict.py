"""The `task` release's training distribution: the theorem's population with the authors'
task rules applied as their task generator applies them (docs/task.md): variables of `r1`
never the first operand, of `r2` never the second, a seeded fraction of the ordered
operand-value pairs held out; every other sequence keeps its weight (renormalised). The
layouts stay the theorem's; evaluation is always on the whole population."""

from __future__ import annotations

import torch
from torch import Tensor

from empirical.bridge.theorem_model.token_population import TokenPopulation


def held_out_pairs(p: int, fraction: float, seed: int) -> Tensor:
    """[n, 2] ordered value pairs held out: round(fraction p^2) of the p^2, seeded."""
    n = round(fraction * p * p)
    order = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))[:n]
    return torch.stack([order // p, order % p], dim=1)


def operand_values(tokens: Tensor, p: int, K: int, L: int) -> tuple[Tensor, Tensor]:
    """(variables [N, 2], values [N, 2]) of the two operands at positions L-3, L-2: the
    variable index (-1 for a number) and the value (a number's own, a variable's assigned one:
    the token after it in the (variable, value) slot pairs at positions 1..2K)."""
    ops = tokens[:, L - 3 : L - 1]
    variables = torch.where(ops >= p, ops - p, torch.full_like(ops, -1))
    values = ops.clone()
    slots = tokens[:, 1 : 1 + 2 * K].reshape(len(tokens), K, 2)  # (variable, value) pairs
    for side in range(2):
        is_var = ops[:, side] >= p
        match = slots[:, :, 0] == ops[:, side : side + 1]  # [N, K]
        assigned = (slots[:, :, 1] * match).sum(dim=1)
        values[:, side] = torch.where(is_var, assigned, ops[:, side])
    return variables, values


def restrict(pop: TokenPopulation, p: int, K: int, L: int, r1: list[int], r2: list[int],
             held_out: Tensor) -> TokenPopulation:  # fmt: skip
    """`pop` with the sequences the rules exclude at weight 0 (the rest renormalised)."""
    variables, values = operand_values(pop.tokens, p, K, L)
    keep = torch.ones(len(pop), dtype=torch.bool)
    for v in r1:
        keep &= variables[:, 0] != v
    for v in r2:
        keep &= variables[:, 1] != v
    if len(held_out):
        pair = values[:, 0] * p + values[:, 1]
        keep &= ~torch.isin(pair, held_out[:, 0] * p + held_out[:, 1])
    weights = torch.where(keep, pop.weights, torch.zeros_like(pop.weights))
    if float(weights.sum()) == 0:
        raise ValueError("the task's rules exclude every training sequence")
    return TokenPopulation(pop.tokens, pop.labels, weights / weights.sum(), pop.kinds)
