"""Exact enumeration of the two-hop chain populations (augmented inputs of chain.md).

Structure of a sequence: a set of ``pointers`` variables (all subsets of that size), the
target of every pointer (any number-bound variable; all choices), the order of the K
assignments in the slot pairs (all K! orders) and the values of the number-bound variables
(all of Z_p^(K - pointers)).  Augmented inputs (what layer 1 writes):

* assignment ``u=z`` in slot pair (2j, 2j+1): x_{2j} = e_{v_u} + pi_{2j} (the left-hand
  side) and x_{2j+1} = e_z + pi_{2j+1} + ebar_u (z the number m_u, or the target variable
  w of a pointer u);
* padding, ``+``, operands and the query as in Theorem C.1 (``population.py``): the query
  x_T = e_= + pi_T + sum ebar_v over its variable operands (not their targets).

Kinds (``CHAIN_KINDS``): 0var (numbers n1, n2), 1var-1hop / 1var-2hop (a number n and a
number-bound / pointer variable v; operand order as ``operand_order``), 2var-1hop (both
operands number-bound) and 2var-2hop (v1, v2 drawn from all K variables, at least one a
pointer).  The label resolves every variable operand to its number (through its pointer).
Every sequence of a kind has the same weight.  With ``pointers=0`` the 0var, 1var-1hop and
2var-1hop populations are exactly C.1's 0var, 1var and 2var populations (same order).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import torch

from .basis import Basis
from .chain_config import CHAIN_KINDS, ChainConfig


@dataclass
class ChainChunk:
    """Compact sequences: x_t = e_{tok[:, t]} + pi_t + sum_k e_{bars[:, t, k]} (index ``dim``
    = no component).  ``bound[:, t]``: the number slot that a queried variable resolves to;
    ``pointer_rhs[:, t]``: the right-hand side of a queried pointer ``v=w`` (where layer 2
    should attend); ``resolved[:, k]``: the variable that operand k resolves to (-1: a
    number operand)."""

    tok: torch.Tensor
    bars: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor
    bound: torch.Tensor
    pointer_rhs: torch.Tensor
    resolved: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]


MAX_SEQUENCES = 1_500_000
"""Populations are built whole and cached (about 0.5 kB per sequence): the CLI refuses
larger ones."""


def check_kind(kind: str) -> None:
    if kind not in CHAIN_KINDS:
        raise ValueError(f"kind={kind!r}: must be one of {', '.join(CHAIN_KINDS)}")


def structures(K: int, pointers: int) -> list[tuple[int, ...]]:
    """Every (pointer set, targets) as a tuple tgt: tgt[u] = -1 for a number-bound u, else
    the number-bound variable that pointer u points to."""
    out = []
    for ptr in itertools.combinations(range(K), pointers):
        free = [u for u in range(K) if u not in ptr]
        for targets in itertools.product(free, repeat=pointers):
            tgt = [-1] * K
            for u, w in zip(ptr, targets, strict=True):
                tgt[u] = w
            out.append(tuple(tgt))
    return out


def operands(cfg: ChainConfig, kind: str, tgt: tuple[int, ...]) -> list[tuple]:
    """Operand choices ((num_a, var_a), (num_b, var_b)) for positions (L-3, L-2) of one
    structure; exactly one of num/var is >= 0 in each pair."""
    check_kind(kind)
    p, K = cfg.p, cfg.K
    bound = [u for u in range(K) if tgt[u] < 0]
    ptrs = [u for u in range(K) if tgt[u] >= 0]
    if kind == "0var":
        return [((x, -1), (y, -1)) for x in range(p) for y in range(p)]
    if kind.startswith("2var"):
        pairs = [(x, y) for x in range(K) for y in range(K)]
        one_hop = [(x, y) for x, y in pairs if x in bound and y in bound]
        chosen = one_hop if kind == "2var-1hop" else [q for q in pairs if q not in one_hop]
        return [((-1, x), (-1, y)) for x, y in chosen]
    variables = bound if kind == "1var-1hop" else ptrs
    fixed = [((n, -1), (-1, v)) for n in range(p) for v in variables]
    swapped = [((-1, v), (n, -1)) for n in range(p) for v in variables]
    return {"fixed": fixed, "swapped": swapped, "mixed": fixed + swapped}[cfg.operand_order]


def population_size(cfg: ChainConfig, kind: str) -> int:
    """(number of structures) * K! * p^(K - pointers) * (operand choices per structure)."""
    structs = structures(cfg.K, cfg.pointers)
    n_ops = len(operands(cfg, kind, structs[0]))
    return len(structs) * math.factorial(cfg.K) * cfg.p ** (cfg.K - cfg.pointers) * n_ops


def _structure_block(cfg: ChainConfig, kind: str, tgt: tuple[int, ...]) -> ChainChunk:
    """Every sequence of one structure: index (perm * p^B + values) * n_ops + op."""
    basis = Basis(cfg.p, cfg.K, cfg.L)
    p, K, L, T, dim = cfg.p, cfg.K, cfg.L, cfg.T, basis.dim
    bound_vars = torch.tensor([u for u in range(K) if tgt[u] < 0], dtype=torch.long)
    B = bound_vars.numel()
    tgt_t = torch.tensor(tgt, dtype=torch.long)
    ops = torch.tensor(operands(cfg, kind, tgt), dtype=torch.long).reshape(-1, 2, 2)
    n_ops = ops.shape[0]
    perms = torch.tensor(list(itertools.permutations(range(K))), dtype=torch.long)
    idx = torch.arange(perms.shape[0] * p**B * n_ops)
    N = idx.numel()
    rows = torch.arange(N)
    op = ops[idx % n_ops]
    rest = idx // n_ops
    digits = (rest % p**B)[:, None] // (p ** torch.arange(B))[None, :] % p  # (N, B)
    values = torch.zeros((N, K), dtype=torch.long)
    values[:, bound_vars] = digits
    perm = perms[rest // p**B]
    resolve = torch.where(tgt_t >= 0, tgt_t, torch.arange(K))  # variable -> number-bound one

    tok = torch.full((N, L), basis.pad, dtype=torch.long)
    bars = torch.full((N, L, 2), dim, dtype=torch.long)
    rhs_of = torch.empty((N, K), dtype=torch.long)
    for j in range(K):
        u = perm[:, j]
        tok[:, 2 * j] = basis.v(0) + u
        is_ptr = tgt_t[u] >= 0
        tok[:, 2 * j + 1] = torch.where(
            is_ptr, basis.v(0) + tgt_t[u].clamp(min=0), basis.n(0) + values[rows, u]
        )
        bars[:, 2 * j + 1, 0] = basis.bar_v(0) + u
        rhs_of[rows, u] = 2 * j + 1
    tok[:, cfg.plus_pos] = basis.plus
    tok[:, T] = basis.eq

    labels = torch.zeros(N, dtype=torch.long)
    bound = torch.zeros((N, L), dtype=torch.bool)
    pointer_rhs = torch.zeros((N, L), dtype=torch.bool)
    resolved = torch.full((N, 2), -1, dtype=torch.long)
    for k, t in enumerate(cfg.operand_pos):
        num, var = op[:, k, 0], op[:, k, 1]
        is_num = num >= 0
        vv = var.clamp(min=0)
        final = resolve[vv]
        tok[:, t] = torch.where(is_num, basis.n(0) + num, basis.v(0) + vv)
        bars[:, T, k] = torch.where(is_num, torch.full_like(num, dim), basis.bar_v(0) + vv)
        labels += torch.where(is_num, num, values[rows, final])
        var_rows = rows[~is_num]
        bound[var_rows, rhs_of[rows, final][~is_num]] = True
        hop2 = ~is_num & (tgt_t[vv] >= 0)
        pointer_rhs[rows[hop2], rhs_of[rows, vv][hop2]] = True
        resolved[:, k] = torch.where(is_num, -1, final)
    labels %= p
    weights = torch.ones(N, dtype=torch.float64)
    return ChainChunk(tok, bars, labels, weights, bound, pointer_rhs, resolved)


def _key(cfg: ChainConfig) -> tuple:
    return (cfg.p, cfg.K, cfg.pointers, cfg.L, cfg.operand_order)


@functools.lru_cache(maxsize=16)
def _population(key: tuple, kind: str) -> ChainChunk:
    p, K, pointers, L, order = key
    cfg = ChainConfig(p=p, K=K, pointers=pointers, L=L, operand_order=order, hop1_share=1.0)
    blocks = [_structure_block(cfg, kind, tgt) for tgt in structures(K, pointers)]
    out = ChainChunk(
        *(torch.cat([getattr(b, f) for b in blocks]) for f in ChainChunk.__dataclass_fields__)
    )
    out.weights /= len(out)
    return out


def chain_population(cfg: ChainConfig, kind: str) -> ChainChunk:
    """The whole population of ``kind`` as one compact chunk (weights sum to 1); cached."""
    check_kind(kind)
    if cfg.pointers == 0 and kind in ("1var-2hop", "2var-2hop"):
        raise ValueError(f"kind={kind!r}: there are no 2-hop sequences with pointers=0")
    return _population(_key(cfg), kind)


def to_dense(chunk: ChainChunk, basis: Basis) -> torch.Tensor:
    """Dense inputs (N, L, dim): one-hot token + one-hot position + ebar components."""
    N, L = chunk.tok.shape
    X = torch.zeros((N, L, basis.dim + 1), dtype=torch.float64)
    X.scatter_add_(2, chunk.tok[..., None], torch.ones((N, L, 1), dtype=torch.float64))
    pos = (basis.pos(0) + torch.arange(L)).expand(N, L)[..., None]
    X.scatter_add_(2, pos, torch.ones((N, L, 1), dtype=torch.float64))
    X.scatter_add_(2, chunk.bars, torch.ones((N, L, 2), dtype=torch.float64))
    return X[..., : basis.dim]


def brute_force_chain(cfg: ChainConfig, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Independent loop-by-loop construction (small configs): dense inputs (N, L, dim) and
    labels, built from the module docstring with ``Basis.vector``; any order."""
    check_kind(kind)
    basis = Basis(cfg.p, cfg.K, cfg.L)
    vec = {lab: basis.vector(lab) for lab in basis.labels}
    p, K, L, T, P = cfg.p, cfg.K, cfg.L, cfg.T, cfg.pointers
    xs, ys = [], []
    for ptr in itertools.combinations(range(K), P):
        nums = [u for u in range(K) if u not in ptr]
        for targets in itertools.product(nums, repeat=P):
            target = dict(zip(ptr, targets, strict=True))
            for order in itertools.permutations(range(K)):
                for vals in itertools.product(range(p), repeat=len(nums)):
                    value = dict(zip(nums, vals, strict=True))
                    value.update({u: value[target[u]] for u in ptr})
                    for ops in _brute_operands(cfg, kind, nums, list(ptr)):
                        X = torch.stack([vec[f"pos{t}"] for t in range(L)])
                        for t in range(cfg.n_assign_positions):
                            X[t] += vec["pad"]
                        for j, u in enumerate(order):
                            X[2 * j] += vec[f"v{u}"] - vec["pad"]
                            rhs = f"v{target[u]}" if u in target else f"n{value[u]}"
                            X[2 * j + 1] += vec[rhs] + vec[f"bar_v{u}"] - vec["pad"]
                        X[cfg.plus_pos] += vec["+"]
                        X[T] += vec["="]
                        label = 0
                        for t, (kind_tok, z) in zip(cfg.operand_pos, ops, strict=True):
                            X[t] += vec[f"{kind_tok}{z}"]
                            if kind_tok == "v":
                                X[T] += vec[f"bar_v{z}"]
                            label += value[z] if kind_tok == "v" else z
                        xs.append(X)
                        ys.append(label % p)
    return torch.stack(xs), torch.tensor(ys, dtype=torch.long)


def _brute_operands(cfg, kind, nums, ptrs):
    p = cfg.p
    if kind == "0var":
        return [(("n", x), ("n", y)) for x in range(p) for y in range(p)]
    if kind == "2var-1hop":
        return [(("v", x), ("v", y)) for x in nums for y in nums]
    if kind == "2var-2hop":
        allv = nums + ptrs
        return [(("v", x), ("v", y)) for x in allv for y in allv if x in ptrs or y in ptrs]
    vs = nums if kind == "1var-1hop" else ptrs
    fixed = [(("n", n), ("v", v)) for n in range(p) for v in vs]
    swapped = [(("v", v), ("n", n)) for n in range(p) for v in vs]
    return {"fixed": fixed, "swapped": swapped, "mixed": fixed + swapped}[cfg.operand_order]
