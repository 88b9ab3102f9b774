"""Vectorized sampling (and, for tiny supports, enumeration) of task sequences.

Every sequence is drawn without per-row Python loops and without rejection:

1. Operands from a *design*: a small table of operand configurations (v1, v2), -1 meaning
   a number, with sampling weights, and the operand values: uniform over the design's
   ordered value pairs (the allowed ones, or the held-out ones); a same-variable
   configuration (`c+c`) draws from the diagonal pairs {x, x} instead.
2. Assignments: their number n uniform over [max(min_assignments, d), max_assignments],
   d = distinct operand variables (assignment_count = "clamped": uniform over
   [min_assignments, max_assignments], then raised to d); the operand variables plus a
   uniform random subset of the others (distractors), in uniform random order; distractor
   values uniform on Z_p; the n two-token blocks placed uniformly over all C(L-4-n, n)
   arrangements of n blocks and L-4-2n pads in positions 0..L-5 (padding = "gaps": each
   of the L-4-2n pads independently in one of the n+1 gaps before, between and after the
   blocks, chosen uniformly).

Step 2 works on *canonical* labels: the operand variables are labels 0..d-1, the others
d..K-1, and a per-configuration relabeling maps labels to variables. A uniformly random
ordered list of n distinct labels containing 0..d-1 then relabels to a uniformly random
ordered list of variables containing the operand variables. Where small (default: 438
lists, 210 layouts), the lists and the layouts are tabulated and one uniform picks a row;
otherwise sorts of random keys draw them (same distribution).
"""

from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass

import torch

from empirical.config_io import ConfigError
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import check_held_out, diagonal_values, ordered_ranks

Configs = list[tuple[int, int]]
Groups = list[tuple[float, Configs]]

# Tables of canonical lists / layouts up to this many rows; beyond, sort-based sampling.
MAX_TABLE_ROWS = 1 << 16
# On the CPU, large batches go through in chunks: each op then stays below ATen's
# parallelization grain, which on a small, busy machine is much faster than waking worker
# threads (and the result does not depend on the thread count).
CPU_CHUNK = 1024

# columns of Design.ctab (float64; all values are small integers). SPAN, VSIZE and LO,
# VOFF are adjacent pairs so that one addcmul gives (n_assign, value index); KB_CANON,
# KB_LAY are the key bases of the canonical-list and layout tables.
SPAN, VSIZE, LO, VOFF, KB_CANON, KB_LAY, V1, V2, TOK1, TOK2, NV, D, LAB1, LAB2, REL = range(15)


def _canon_rows(K: int, A: int, d: int, n: int) -> list[list[int]]:
    """Ordered lists of n distinct labels of 0..K-1 containing 0..d-1, padded with K (an
    unused column), then the columns holding labels 0 and 1 (0 where absent)."""
    rows = []
    for extra in itertools.combinations(range(d, K), n - d):
        for perm in itertools.permutations(list(range(d)) + list(extra)):
            row = list(perm) + [K] * (A - n)
            rows.append(row + [row.index(k) if k in row else 0 for k in (0, 1)])
    return rows


def _layout_rows(R: int, A: int, L: int, n: int) -> list[list[int]]:
    """Positions of n blocks: variable positions (A), value positions (A), then L-3, L-2
    (where a number operand's value sits). Block j at item slot s_j sits at s_j + j.
    Unused columns point at the operand positions, which are written last."""
    rows = []
    for slots in itertools.combinations(range(R - n), n):
        pos = [s + j for j, s in enumerate(slots)]
        rows.append(
            pos + [L - 3] * (A - n) + [q + 1 for q in pos] + [L - 2] * (A - n) + [L - 3, L - 2]
        )
    return rows


class _Ctx:
    """Per-config constants and tables on one device."""

    def __init__(self, cfg: TaskConfig, device, tables: bool = True):
        self.p, self.K, self.L = cfg.p, cfg.K, cfg.L
        self.R = R = cfg.region
        self.min_a, self.max_a = lo, A = cfg.min_assignments, cfg.max_assignments
        self.plus, self.eq, self.pad = cfg.p + cfg.K, cfg.p + cfg.K + 1, cfg.p + cfg.K + 2
        self.device = dev = torch.device(device)
        self.gaps = cfg.padding == "gaps"  # pads to uniformly chosen gaps: drawn, no table
        K, L = self.K, self.L
        self.arK = torch.arange(K, device=dev)
        self.arA = torch.arange(A, device=dev)
        self.arR = torch.arange(R, device=dev)
        self.ar2 = torch.arange(2, device=dev)
        template = torch.full((1, L), self.pad, dtype=torch.long)
        template[0, L - 4], template[0, L - 1] = self.plus, self.eq
        self.template = template.to(dev)
        self.number_cols = torch.tensor([[A, A + 1]], device=dev)  # extra columns, see rows
        self.layout_tail = torch.tensor([[L - 3, L - 2]], device=dev)
        self.keys = [(d, n) for d in range(3) for n in range(max(lo, d), A + 1) if n <= K]
        n_canon = sum(math.comb(K - d, n - d) * math.factorial(n) for d, n in self.keys)
        n_layouts = sum(math.comb(R - n, n) for n in range(lo, A + 1))
        n_perms = sum(math.factorial(n) for n in range(lo, A + 1))
        self.canon = self.layouts = self.perms = None
        n_keys = 3 * (A + 1)  # canonical-list keys d * (A + 1) + n, then layout keys + n
        if tables and n_canon <= MAX_TABLE_ROWS:
            self.canon = self._table(
                {d * (A + 1) + n: _canon_rows(K, A, d, n) for d, n in self.keys}
            )
        elif tables and n_perms <= MAX_TABLE_ROWS:
            self.perms = self._table(
                {
                    n: [list(q) + list(range(n, A)) for q in itertools.permutations(range(n))]
                    for n in range(lo, A + 1)
                }
            )
        if tables and n_layouts <= MAX_TABLE_ROWS and not self.gaps:
            self.layouts = self._table(
                {n_keys + n: _layout_rows(R, A, L, n) for n in range(lo, A + 1)}
            )
        self.fast = self.canon is not None and self.layouts is not None
        if self.fast:  # one meta table for both, indexed by key
            meta = self.canon[1].clone()
            meta[n_keys:] = self.layouts[1][n_keys:]
            self.meta = meta
        # uniform columns: config, n, value, canonical list, layout, values (A + 2)
        canon_w = 1 if self.canon is not None else K + (1 if self.perms is not None else A)
        self.width = 3 + canon_w + (1 if self.layouts is not None else R) + A + 2

    def _table(self, groups: dict[int, list[list[int]]]):
        """(rows, meta): meta[key] = (offset, count) of the key's rows, as float64."""
        rows, meta = [], [[0, 0] for _ in range(4 * (self.max_a + 1))]
        for key, group in groups.items():
            meta[key] = [len(rows), len(group)]
            rows += group
        width = len(rows[0]) if rows else 1
        return (
            torch.tensor(rows, dtype=torch.long, device=self.device).reshape(-1, width),
            torch.tensor(meta, dtype=torch.float64, device=self.device),
        )

    @staticmethod
    def pick(table, key, u):
        # index_select: plain 2-D advanced indexing goes parallel (slow on a busy CPU) early
        rows, meta = table
        m = meta.index_select(0, key)
        return rows.index_select(0, torch.addcmul(m[:, 0], u, m[:, 1]).long())


@dataclass
class Design:
    """Operand configurations with sampling weights, and the values they draw from."""

    configs: Configs
    weights: list[float]
    cdf: torch.Tensor  # (m,) float64
    ctab: torch.Tensor  # (m, REL + K + 1) float64, columns above
    ltab: torch.Tensor  # the same, long
    isvar: torch.Tensor  # (m, 2) bool
    vtab: torch.Tensor  # (n_pair + n_diag, 2) int16 operand values: ordered pairs, diagonal
    n_pair: int
    n_diag: int
    clamped: bool = False  # draw n on [min_assignments, max], then raise it to d

    def value_count(self, i: int) -> int:
        a, b = self.configs[i]
        return self.n_diag if a == b >= 0 else self.n_pair


def design_from_configs(
    cfg: TaskConfig,
    configs: Configs,
    weights: list[float],
    pair_ranks,
    diag_values,
    device,
    count: str | None = None,
) -> Design:
    """count: the assignment-count rule ("uniform" or "clamped"; default the config's)."""
    p, K, A = cfg.p, cfg.K, cfg.max_assignments
    clamped = (cfg.assignment_count if count is None else count) == "clamped"
    total = sum(weights)
    weights = [w / total for w in weights]
    cdf = torch.tensor(list(itertools.accumulate(weights)), dtype=torch.float64)
    cdf[-1] = 1.0
    n_pair, n_diag = int(pair_ranks.numel()), int(diag_values.numel())
    rows = []
    for a, b in configs:
        ops = [v for v in dict.fromkeys((a, b)) if v >= 0]
        d = len(ops)
        lo = cfg.min_assignments if clamped else max(cfg.min_assignments, d)
        same = a == b >= 0
        relabel = ops + [v for v in range(K) if v not in ops] + [-2]  # label K: unused
        rows.append(
            [A - lo + 1, n_diag if same else n_pair, lo, n_pair if same else 0]
            + [d * (A + 1), 3 * (A + 1), a, b]
            + [p + a if a >= 0 else 0, p + b if b >= 0 else 0, (a >= 0) + (b >= 0), d]
            + [0, 1 if d == 2 else 0]  # canonical label of each operand's variable
            + relabel
        )
    ctab = torch.tensor(rows, dtype=torch.float64).reshape(len(configs), -1)
    pair_ranks, diag_values = pair_ranks.reshape(-1), diag_values.reshape(-1)
    vtab = torch.cat(
        [
            torch.stack([pair_ranks // p, pair_ranks % p], dim=1),
            torch.stack([diag_values, diag_values], dim=1),
        ]
    )
    return Design(
        configs=list(configs),
        weights=weights,
        cdf=cdf.to(device),
        ctab=ctab.to(device),
        ltab=ctab.long().to(device),
        isvar=torch.tensor([[a >= 0, b >= 0] for a, b in configs], device=device).reshape(-1, 2),
        vtab=vtab.to(device=device, dtype=torch.int16),
        n_pair=n_pair,
        n_diag=n_diag,
        clamped=clamped,
    )


def make_design(
    cfg: TaskConfig,
    groups: Groups,
    held: torch.Tensor,
    values: str,
    device,
    strict: bool = False,
) -> Design | None:
    """Split each group's weight uniformly over its usable configurations.

    values: "allowed" (pairs not held out) or "held"; `held` is read per
    cfg.held_out_form (unordered pairs hold out both orders). A same-variable configuration
    is unusable if no diagonal pair {x, x} is available. An emptied group with weight > 0 is
    a ConfigError if `strict` (training), else its weight goes to the other groups; None if
    nothing is left.
    """
    p = cfg.p
    held = check_held_out(cfg, held)
    if values == "allowed":
        keep = torch.ones(p * p, dtype=torch.bool)
        keep[ordered_ranks(held, p, cfg.held_out_form)] = False
        pair_ranks = keep.nonzero().reshape(-1)
        keep = torch.ones(p, dtype=torch.bool)
        keep[diagonal_values(held)] = False
        diag = keep.nonzero().reshape(-1)
    elif values == "held":
        pair_ranks, diag = ordered_ranks(held, p, cfg.held_out_form), diagonal_values(held)
    else:
        raise ValueError(f"values must be 'allowed' or 'held', got {values!r}")
    configs: Configs = []
    weights: list[float] = []
    for weight, group in groups:
        if weight <= 0:
            continue
        usable = [(a, b) for a, b in group if (diag if a == b >= 0 else pair_ranks).numel()]
        if not usable:
            if strict:
                raise ConfigError(
                    "task.held_out_fraction: this seed's held-out pairs include every pair "
                    f"{{x, x}}, so the same-variable operands {group} cannot be trained; "
                    "set task.allow_same_variable_operands = false or hold out less"
                )
            continue
        configs += usable
        weights += [weight / len(usable)] * len(usable)
    if not configs:
        return None
    return design_from_configs(cfg, configs, weights, pair_ranks, diag, device)


# ---------------------------------------------------------------------- building
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
        elif ctx.gaps:
            # pad j (of the R - 2n) goes to gap g_j, uniform on 0..n; block i then starts
            # after the pads in gaps 0..i and the i blocks before it
            R, L = ctx.R, ctx.L
            valid = ctx.arA < n_assign[:, None]
            gap = (U[:, col : col + R] * (n_assign + 1).double()[:, None]).long()
            gap = torch.minimum(gap, n_assign[:, None])  # (guards u * (n + 1) rounding up)
            gap = torch.where(ctx.arR < (R - 2 * n_assign)[:, None], gap, A + 1)
            col += R
            pos = (gap[:, :, None] <= ctx.arA).sum(1) + 2 * ctx.arA
            lay = torch.cat(
                [
                    torch.where(valid, pos, L - 3),
                    torch.where(valid, pos + 1, L - 2),
                    ctx.layout_tail.expand(pos.shape[0], 2),
                ],
                dim=1,
            )
        else:
            R, L = ctx.R, ctx.L
            valid = ctx.arA < n_assign[:, None]
            free = ctx.arR >= (R - n_assign)[:, None]
            slots = (U[:, col : col + R] + 2.0 * free.double()).argsort(dim=1)[:, :A]
            col += R
            pos = torch.where(valid, slots, R + A).sort(dim=1).values + ctx.arA
            lay = torch.cat(
                [
                    torch.where(valid, pos, L - 3),
                    torch.where(valid, pos + 1, L - 2),
                    ctx.layout_tail.expand(pos.shape[0], 2),
                ],
                dim=1,
            )
    dv = (U[:, col : col + A + 2] * p).long()
    return _build(ctx, design, c, row, values, canon, lay, dv)


def _chunks(ctx: _Ctx, n: int):
    step = CPU_CHUNK if ctx.device.type == "cpu" else max(n, 1)
    return [slice(i, i + step) for i in range(0, max(n, 1), step)]


def sample_design(ctx: _Ctx, design: Design, n: int, generator: torch.Generator) -> Batch:
    U = torch.rand((n, ctx.width), generator=generator, device=ctx.device, dtype=torch.float64)
    parts = []
    for s in _chunks(ctx, n):
        u = U[s]
        c = torch.searchsorted(design.cdf, u[:, 0].contiguous(), right=True)  # cdf <= u
        parts.append(_draw(ctx, design, c, u))
    return parts[0] if len(parts) == 1 else Batch.cat(parts)


def draw_given(ctx: _Ctx, design: Design, c, x, y, generator: torch.Generator) -> Batch:
    """Random assignments around given configs c and operand values x, y."""
    n = c.shape[0]
    U = torch.rand((n, ctx.width), generator=generator, device=ctx.device, dtype=torch.float64)
    values = torch.stack([x, y], dim=1)
    parts = [_draw(ctx, design, c[s], U[s], values[s]) for s in _chunks(ctx, n)]
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
            parts.append(
                _build(
                    ctx,
                    design,
                    c,
                    design.ltab.index_select(0, c),
                    pairs.index_select(0, iv),
                    cn,
                    lays.index_select(0, il),
                    dv,
                )
            )
    return Batch.cat(parts)


# ---------------------------------------------------------------------- training
def training_groups(cfg: TaskConfig) -> Groups:
    """0-var, 1-var (first), 1-var (second), 2-var groups with cfg.training_group_weights
    (mix = "fractions" or "rows"); each group's weight is split equally over its configs."""
    a13 = [(v, -1) for v in cfg.allowed_vars(0)]
    a14 = [(-1, v) for v in cfg.allowed_vars(1)]
    w0, w13, w14, w2 = cfg.training_group_weights
    return [
        (w0, [(-1, -1)]),
        (w13, a13),
        (w14, a14),
        (w2, cfg.training_2var_combos()),
    ]


class TrainingSampler:
    """Draws training batches of one config and held-out table on one device.

    Built once (tables on the device), then `sample(n, generator)` is a fixed sequence of
    vectorized ops: no Python loop over rows and no rejection. A config of the chain family
    (cfg.family == "chain") builds its subclass chain.ChainSampler instead.
    """

    def __new__(cls, cfg: TaskConfig, *args, **kwargs):
        if cls is TrainingSampler and getattr(cfg, "family", "assign_add") == "chain":
            from empirical.task.chain import ChainSampler

            return super().__new__(ChainSampler)
        return super().__new__(cls)

    def __init__(self, cfg: TaskConfig, held_out: torch.Tensor, device="cpu", tables: bool = True):
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


_SAMPLERS: dict[tuple, TrainingSampler] = {}
# (config, id, version, device) -> (weak reference to the held-out object, sampler key)
_FAST_KEYS: dict[tuple, tuple[weakref.ref | None, tuple]] = {}


def _same_object(ref: weakref.ref | None, obj) -> bool:
    return ref is not None and ref() is obj


def get_training_sampler(cfg: TaskConfig, held_out: torch.Tensor, device="cpu") -> TrainingSampler:
    """A cached TrainingSampler for (config, held-out pairs, device)."""
    device = torch.device(device)
    # The same held-out tensor object, unmodified, maps straight to its sampler. An id alone
    # is not enough: Python reuses the id of a freed tensor for a new one, so the entry also
    # holds a weak reference that must still point at this very object.
    fast = (repr(cfg), id(held_out), getattr(held_out, "_version", None), str(device))
    ref, key = _FAST_KEYS.get(fast, (None, None))
    if not _same_object(ref, held_out) or key not in _SAMPLERS:
        held = check_held_out(cfg, held_out)
        key = (fast[0], held.numpy().tobytes(), fast[3])
        if key not in _SAMPLERS:
            if len(_SAMPLERS) >= 8:
                _SAMPLERS.pop(next(iter(_SAMPLERS)))
            _SAMPLERS[key] = TrainingSampler(cfg, held, device)
        if len(_FAST_KEYS) >= 64:
            _FAST_KEYS.clear()
        try:
            ref = weakref.ref(held_out)
        except TypeError:  # a list or other object without weak references: check every call
            ref = None
        _FAST_KEYS[fast] = (ref, key)
    return _SAMPLERS[key]


def sample_training_batch(
    cfg: TaskConfig,
    n: int,
    generator: torch.Generator,
    device=None,
    held_out: torch.Tensor | None = None,
) -> Batch:
    """n training sequences drawn on the fly (see the module docstring for the distribution).

    A thin cached wrapper of TrainingSampler(cfg, held_out, device).sample(n, generator),
    which a training loop may hold itself. held_out is required: pass
    held_out_pairs(cfg, seed), or an empty (0, 2) tensor to hold nothing out. device
    defaults to the generator's device.
    """
    if held_out is None:
        raise ValueError(
            "sample_training_batch needs held_out=held_out_pairs(cfg, seed) "
            "(or torch.zeros((0, 2), dtype=torch.long) to hold nothing out)"
        )
    device = generator.device if device is None else torch.device(device)
    return get_training_sampler(cfg, held_out, device).sample(n, generator)
