"""Vectorized sampling (and, for tiny supports, enumeration) of the assign_add family's
sequences, and its training sampler (`TrainingSampler`): no loop over rows, no rejection
(docs/task.md, "How a sequence is drawn").

The assignments are drawn on *canonical* labels (the operand variables 0..d-1, the others
d..K-1), which a per-configuration relabeling maps to variables. Where small (default: 438
lists, 210 layouts), the lists and the layouts are tabulated and one uniform picks a row;
otherwise sorts of random keys draw them (same distribution).
"""

from __future__ import annotations

import math

import torch

from empirical.task.assign_add.config import AssignAddTask
from empirical.task.assign_add.design import (
    KB_CANON,
    KB_LAY,
    LAB1,
    LAB2,
    LO,
    NV,
    REL,
    SPAN,
    TOK1,
    TOK2,
    V1,
    V2,
    VOFF,
    VSIZE,
    D,
    Design,
    _canon_rows,
    _Ctx,
    _layout_rows,
    block_positions,
    draw_in_chunks,
    make_design,
    row_chunks,
    training_groups,
)
from empirical.task.batch import Batch
from empirical.task.pairs import check_held_out


def _build(ctx: _Ctx, design: Design, c, row, values, canon, lay, dv) -> Batch:
    """Sequences from config indices c (row: their ltab rows), operand values (n, 2),
    canonical lists (n, A + 2), layouts (n, 2A + 2) and uniform values (n, A + 2) (see
    _canon_rows and _layout_rows for the extra columns)."""
    A, K, p, L = ctx.max_a, ctx.K, ctx.p, ctx.L
    isv = design.isvar.index_select(0, c)  # (n, 2)
    assigned = row[:, REL : REL + K + 1].gather(1, canon[:, :A])  # variables (-2: unused)
    # column of each operand's variable among the assignments; A, A + 1 for a number
    cols = torch.where(isv, canon[:, A:].gather(1, row[:, LAB1 : LAB2 + 1]), ctx.number_cols)
    dv.scatter_(1, cols, values)  # operand variables get the operands' values
    tok = ctx.template.expand(values.shape[0], L).contiguous()
    # unused columns write into L-3 and L-2, overwritten by the operands just below
    tok.scatter_(1, lay[:, : 2 * A], torch.cat([assigned + p, dv[:, :A]], dim=1))
    tok[:, L - 3 : L - 1] = torch.where(isv, row[:, TOK1 : TOK2 + 1], values)
    return Batch(
        tokens=tok,
        labels=values.sum(1) % p,
        n_vars=row[:, NV].contiguous(),
        operand_values=values,
        value_positions=lay[:, A:].gather(1, cols),
        operand_vars=row[:, V1 : V2 + 1].contiguous(),
    )


def _draw(ctx: _Ctx, design: Design, c, U, values=None) -> Batch:
    """Random sequences for config indices c; U: (n, ctx.width) uniforms in [0, 1)."""
    A, K, p = ctx.max_a, ctx.K, ctx.p
    rowf = design.ctab.index_select(0, c)
    row = design.ltab.index_select(0, c)
    # n_assign = LO + floor(u * SPAN), value index = VOFF + floor(u' * VSIZE)
    nv = torch.addcmul(rowf[:, LO : VOFF + 1], U[:, 1:3], rowf[:, SPAN : VSIZE + 1]).long()
    n_assign = nv[:, 0]
    if design.clamped:
        n_assign = torch.maximum(n_assign, row[:, D])
    if values is None:
        values = design.vtab.index_select(0, nv[:, 1]).long()
    if ctx.fast:
        keys = n_assign[:, None] + row[:, KB_CANON : KB_LAY + 1]  # (n, 2)
        m = ctx.meta.index_select(0, keys.reshape(-1)).view(-1, 2, 2)
        idx = torch.addcmul(m[..., 0], U[:, 3:5], m[..., 1]).long()
        canon = ctx.canon[0].index_select(0, idx[:, 0])
        lay = ctx.layouts[0].index_select(0, idx[:, 1])
        col = 5
    else:
        col = 3
        if ctx.canon is not None:
            canon = ctx.pick(ctx.canon, row[:, KB_CANON] + n_assign, U[:, col])
            col += 1
        else:
            valid = ctx.arA < n_assign[:, None]
            keys = U[:, col : col + K] - (ctx.arK < row[:, D, None]).double()
            col += K
            chosen = keys.argsort(dim=1)[:, :A]
            if ctx.perms is not None:
                order = ctx.pick(ctx.perms, n_assign, U[:, col])
                col += 1
            else:
                order = (U[:, col : col + A] + 2.0 * (~valid).double()).argsort(dim=1)
                col += A
            canon = torch.where(valid, chosen.gather(1, order), K)
            where = (canon[:, None, :] == ctx.ar2[:, None]).long().argmax(2)  # labels 0, 1
            canon = torch.cat([canon, where], dim=1)
        if ctx.layouts is not None:
            lay = ctx.pick(ctx.layouts, row[:, KB_LAY] + n_assign, U[:, col])
            col += 1
        else:
            valid = ctx.arA < n_assign[:, None]
            pos = block_positions(n_assign, U[:, col : col + ctx.R], ctx.arA, ctx.arR, ctx.gaps)
            col += ctx.R
            lay = torch.cat(
                [
                    torch.where(valid, pos, ctx.L - 3),
                    torch.where(valid, pos + 1, ctx.L - 2),
                    ctx.layout_tail.expand(pos.shape[0], 2),
                ],
                dim=1,
            )
    dv = (U[:, col : col + A + 2] * p).long()
    return _build(ctx, design, c, row, values, canon, lay, dv)


def sample_design(ctx: _Ctx, design: Design, n: int, generator: torch.Generator) -> Batch:
    def draw(u):
        c = torch.searchsorted(design.cdf, u[:, 0].contiguous(), right=True)  # cdf <= u
        return _draw(ctx, design, c, u)

    return draw_in_chunks(draw, n, ctx.width, ctx.device, generator)


def draw_given(ctx: _Ctx, design: Design, c, x, y, generator: torch.Generator) -> Batch:
    """Random assignments around given configs c and operand values x, y."""
    n = c.shape[0]
    U = torch.rand((n, ctx.width), generator=generator, device=ctx.device, dtype=torch.float64)
    values = torch.stack([x, y], dim=1)
    parts = [_draw(ctx, design, c[s], U[s], values[s]) for s in row_chunks(n, ctx.device)]
    return parts[0] if len(parts) == 1 else Batch.cat(parts)


# ---------------------------------------------------------------------- support
def _count(ctx: _Ctx, n_assign: int, d: int) -> int:
    """Sequences per operand configuration with d distinct variables and n assignments."""
    K, p, R = ctx.K, ctx.p, ctx.R
    return (
        math.comb(K - d, n_assign - d)
        * math.factorial(n_assign)
        * p ** (n_assign - d)
        * math.comb(R - n_assign, n_assign)
    )


def support_size(ctx: _Ctx, design: Design) -> int:
    """Exact number of distinct sequences the design can produce (a Python int)."""
    total = 0
    for i, (a, b) in enumerate(design.configs):
        d = len([v for v in dict.fromkeys((a, b)) if v >= 0])
        total += design.value_count(i) * sum(
            _count(ctx, n, d) for n in range(max(ctx.min_a, d), ctx.max_a + 1)
        )
    return total


def enumerate_design(ctx: _Ctx, design: Design) -> Batch:
    """Every sequence of the design's support, once each (meant for small supports)."""
    A, K, p, R, L = ctx.max_a, ctx.K, ctx.p, ctx.R, ctx.L
    dev = ctx.device
    vtab = design.vtab.long()
    parts = []
    for i, (a, b) in enumerate(design.configs):
        same = a == b >= 0
        pairs = vtab[design.n_pair :] if same else vtab[: design.n_pair]
        d = len([v for v in dict.fromkeys((a, b)) if v >= 0])
        for n in range(max(ctx.min_a, d), A + 1):
            canon = torch.tensor(_canon_rows(K, A, d, n), dtype=torch.long, device=dev)
            canon = canon.reshape(-1, A + 2)
            lays = torch.tensor(_layout_rows(R, A, L, n), dtype=torch.long, device=dev)
            lays = lays.reshape(-1, 2 * A + 2)
            k = n - d
            dvals = (
                torch.cartesian_prod(*[torch.arange(p, device=dev)] * k).reshape(-1, k)
                if k
                else torch.zeros((1, 0), dtype=torch.long, device=dev)
            )
            grids = torch.meshgrid(
                *(torch.arange(t.shape[0], device=dev) for t in (pairs, canon, dvals, lays)),
                indexing="ij",
            )
            iv, ic, idv, il = (g.reshape(-1) for g in grids)
            cn = canon.index_select(0, ic)
            # distractor columns (labels d..K-1) take the chosen values in order
            distractor = (cn[:, :A] >= d) & (cn[:, :A] < K)
            rank = (distractor.long().cumsum(1) - 1).clamp(min=0, max=max(k - 1, 0))
            dv = torch.zeros((cn.shape[0], A + 2), dtype=torch.long, device=dev)
            if k:
                dv[:, :A] = dvals.index_select(0, idv).gather(1, rank)
            c = torch.full((cn.shape[0],), i, dtype=torch.long, device=dev)
            row = design.ltab.index_select(0, c)
            values, lay = pairs.index_select(0, iv), lays.index_select(0, il)
            parts.append(_build(ctx, design, c, row, values, cn, lay, dv))
    return Batch.cat(parts)


class TrainingSampler:
    """Draws training batches of one config and held-out table on one device: built once
    (tables on the device), then `sample(n, generator)` is a fixed sequence of torch ops."""

    def __init__(
        self, cfg: AssignAddTask, held_out: torch.Tensor, device="cpu", tables: bool = True
    ):
        """tables=False forces the sort-based draws (same distribution; for testing)."""
        self.cfg = cfg
        self.device = torch.device(device)
        self.held_out = check_held_out(cfg, held_out)
        self.ctx = _Ctx(cfg, self.device, tables=tables)
        self.design = make_design(
            cfg, training_groups(cfg), self.held_out, "allowed", self.device, strict=True
        )

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n = {n!r} must be an integer >= 0")
        if generator.device.type != self.device.type:
            raise ValueError(
                f"generator is on {generator.device}, the sampler on {self.device}: "
                "make the generator on the target device (training_generator(seed, device))"
            )
        return self._draw(n, generator)

    def _draw(self, n: int, generator: torch.Generator) -> Batch:
        """n rows of this family's training distribution (arguments already checked)."""
        return sample_design(self.ctx, self.design, n, generator)
