"""Operand designs of the assign-and-add family (a table of operand configurations (v1, v2),
-1 meaning a number, with weights, and the value pairs they draw from), the per-config tables
a draw picks rows from (empirical.task.assign_add.draw), and the draw helpers the chain
and lego families share.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from empirical.config.io import ConfigError
from empirical.task.assign_add.config import AssignAddTask
from empirical.task.batch import Batch
from empirical.task.pairs import check_held_out, complement, diagonal_values, ordered_ranks

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


def row_chunks(n: int, device: torch.device) -> list[slice]:
    """Slices of n rows: CPU_CHUNK rows each on the CPU, one chunk elsewhere."""
    step = CPU_CHUNK if device.type == "cpu" else max(n, 1)
    return [slice(i, i + step) for i in range(0, max(n, 1), step)]


def draw_in_chunks(draw, n: int, width: int, device: torch.device, generator) -> Batch:
    """`draw(U)` over the `row_chunks` of n rows of uniforms U (n, width), concatenated."""
    U = torch.rand((n, width), generator=generator, device=device, dtype=torch.float64)
    parts = [draw(U[rows]) for rows in row_chunks(n, device)]
    return parts[0] if len(parts) == 1 else Batch.cat(parts)


def weights_cdf(weights, device) -> torch.Tensor:
    """The cumulative distribution (float64) of relative `weights`, its last entry exactly 1."""
    w = torch.tensor(weights, dtype=torch.float64)
    cdf = (w / w.sum()).cumsum(0)
    cdf[-1] = 1.0
    return cdf.to(device)


def block_positions(n_blocks, u, arA, arR, gaps: bool) -> torch.Tensor:
    """(n, A) start positions, in order within 0..R-1, of n_blocks two-token blocks (entries
    past n_blocks: unused) from uniforms u (n, R) (A, R: the lengths of arA, arR): uniform
    over arrangements, or with `gaps` each of the R - 2n pads in a uniformly chosen gap."""
    A, R = arA.shape[0], arR.shape[0]
    if gaps:
        # pad j goes to gap g_j, uniform on 0..n; block i starts after the pads in gaps 0..i
        # and the i blocks before it
        gap = (u * (n_blocks + 1).double()[:, None]).long()
        gap = torch.minimum(gap, n_blocks[:, None])  # (guards u * (n + 1) rounding up)
        gap = torch.where(arR < (R - 2 * n_blocks)[:, None], gap, A + 1)
        return (gap[:, :, None] <= arA).sum(1) + 2 * arA
    free = arR >= (R - n_blocks)[:, None]
    slots = (u + 2.0 * free.double()).argsort(dim=1)[:, :A]
    valid = arA < n_blocks[:, None]
    return torch.where(valid, slots, R + A).sort(dim=1).values + arA


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

    def __init__(self, cfg: AssignAddTask, device, tables: bool = True):
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


def design_from_configs(cfg: AssignAddTask, configs: Configs, weights: list[float], pair_ranks,
                        diag_values, device, count: str | None = None) -> Design:  # fmt: skip
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


def make_design(cfg: AssignAddTask, groups: Groups, held: torch.Tensor, values: str, device,
                strict: bool = False) -> Design | None:  # fmt: skip
    """Split each group's weight uniformly over its usable configurations (a same-variable one
    needs an available diagonal pair {x, x}). values: "allowed" (pairs not held out, per
    cfg.held_out_form) or "held". An emptied group with weight > 0 is a ConfigError if
    `strict` (training), else its weight goes to the other groups; None if nothing is left."""
    p = cfg.p
    held = check_held_out(cfg, held)
    if values == "allowed":
        pair_ranks = complement(ordered_ranks(held, p, cfg.held_out_form), p * p)
        diag = complement(diagonal_values(held), p)
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


def training_groups(cfg: AssignAddTask) -> Groups:
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
