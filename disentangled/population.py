"""Exact enumeration of the populations of Theorem C.1 (augmented inputs of eq. (1)).

A sequence has L positions. Assignments fill the slot pairs (2j, 2j+1), j = 0..K-1, in the
order of a permutation pi of the K variables (all K! orders, uniformly): position 2j holds
``x = e_{v_u} + pi_{2j}`` and 2j+1 holds ``x = e_{n_{m_u}} + pi_{2j+1} + ebar_{v_u}`` with
u = pi(j); the rest of 0..L-5 is ``e_pad + pi_t``; L-4 is ``e_+ + pi_{L-4}``; L-3 and L-2
hold the operands ``e_z + pi_t``; the query at T = L-1 is ``e_= + pi_T + sum ebar_v`` over
its variable operands.  Values m in Z_p^K are enumerated exhaustively (uniform weights).

* 0var: operands (n1, n2) in Z_p^2, label n1 + n2, no ebar in the query.
* 1var: a number n in Z_p and a variable v in 0..K-1, label n + m_v; ``fixed`` order puts
  n at L-3 and v at L-2, ``swapped`` the reverse, ``mixed`` both (each with weight 1/2).
* 2var: (v1, v2) in {0..K-1}^2 independently (v1 = v2 allowed: query carries 2 ebar_v),
  label m_v1 + m_v2.

Population sizes: K! p^K * (p^2, p K * orders, K^2).  Every sequence has the same weight.

Two representations are produced from the same index arithmetic, chunk by chunk:
``iter_compact`` (token index per position plus ebar indices, what the fast evaluator
uses) and ``iter_population`` (dense float64 inputs (N, L, dim)).  ``brute_force_population``
is an independent, loop-by-loop construction from the description above, used in tests.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .basis import Basis
from .config import SimConfig

KINDS = ("0var", "1var", "2var")
DEFAULT_CHUNK = 32768
CACHE_MAX = 300_000


@dataclass
class PopulationChunk:
    """Dense chunk: inputs (N, L, dim) float64, labels (N,) long, weights (N,) float64."""

    inputs: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor


@dataclass
class CompactChunk:
    """Compact chunk.  x_t = e_{tok[:, t]} + pi_t + sum_k e_{bars[:, t, k]}, where the index
    ``dim`` (one past the basis) stands for "no component".  ``bound[:, t]`` marks the
    assignment number slots bound to a queried variable; ``operand_number[:, t]`` the
    operand positions holding a number."""

    tok: torch.Tensor
    bars: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor
    bound: torch.Tensor
    operand_number: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")


def _operands(cfg: SimConfig, kind: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Operand choices as ((num_a, var_a), (num_b, var_b)) for positions (L-3, L-2);
    exactly one of num/var is >= 0 in each pair."""
    p, K = cfg.p, cfg.K
    _check_kind(kind)
    if kind == "0var":
        return [((a, -1), (b, -1)) for a in range(p) for b in range(p)]
    if kind == "2var":
        return [((-1, a), (-1, b)) for a in range(K) for b in range(K)]
    fixed = [((n, -1), (-1, v)) for n in range(p) for v in range(K)]
    swapped = [((-1, v), (n, -1)) for n in range(p) for v in range(K)]
    return {"fixed": fixed, "swapped": swapped, "mixed": fixed + swapped}[cfg.operand_order]


def population_size(cfg: SimConfig, kind: str) -> int:
    """K! * p^K * (number of operand choices)."""
    return math.factorial(cfg.K) * cfg.p**cfg.K * len(_operands(cfg, kind))


def _perms(K: int) -> torch.Tensor:
    return torch.tensor(list(itertools.permutations(range(K))), dtype=torch.long).reshape(-1, K)


def compact_slice(cfg: SimConfig, kind: str, start: int, stop: int) -> CompactChunk:
    """Sequences with population indices start..stop-1.

    Index i = (perm * p^K + values) * n_ops + op, values in base p (digit u = m_u)."""
    basis = Basis.from_config(cfg)
    p, K, L, T = cfg.p, cfg.K, cfg.L, cfg.T
    dim = basis.dim
    ops = torch.tensor(_operands(cfg, kind), dtype=torch.long)  # (n_ops, 2, 2)
    n_ops = ops.shape[0]
    total = population_size(cfg, kind)
    idx = torch.arange(start, min(stop, total), dtype=torch.long)
    N = idx.numel()
    op = ops[idx % n_ops]  # (N, 2, 2)
    rest = idx // n_ops
    values = (rest % p**K)[:, None] // (p ** torch.arange(K))[None, :] % p  # (N, K)
    perm = _perms(K)[rest // p**K]  # (N, K): variable in slot pair j
    rows = torch.arange(N)

    tok = torch.full((N, L), basis.pad, dtype=torch.long)
    bars = torch.full((N, L, 2), dim, dtype=torch.long)
    slot_of = torch.empty((N, K), dtype=torch.long)  # number position of variable u
    for j in range(K):
        u = perm[:, j]
        tok[:, 2 * j] = basis.v(0) + u
        tok[:, 2 * j + 1] = basis.n(0) + values[rows, u]
        bars[:, 2 * j + 1, 0] = basis.bar_v(0) + u
        slot_of[rows, u] = 2 * j + 1
    tok[:, cfg.plus_pos] = basis.plus
    tok[:, T] = basis.eq

    labels = torch.zeros(N, dtype=torch.long)
    bound = torch.zeros((N, L), dtype=torch.bool)
    operand_number = torch.zeros((N, L), dtype=torch.bool)
    for k, t in enumerate(cfg.operand_pos):
        num, var = op[:, k, 0], op[:, k, 1]
        is_num = num >= 0
        vv = var.clamp(min=0)
        tok[:, t] = torch.where(is_num, basis.n(0) + num, basis.v(0) + vv)
        bars[:, T, k] = torch.where(is_num, torch.full_like(num, dim), basis.bar_v(0) + vv)
        labels += torch.where(is_num, num, values[rows, vv])
        bound[rows[~is_num], slot_of[rows, vv][~is_num]] = True
        operand_number[:, t] = is_num
    labels %= p
    weights = torch.full((N,), 1.0 / total, dtype=torch.float64)
    return CompactChunk(tok, bars, labels, weights, bound, operand_number)


@functools.lru_cache(maxsize=12)
def _cached_chunks(cfg: SimConfig, kind: str, chunk_size: int) -> tuple[CompactChunk, ...]:
    total = population_size(cfg, kind)
    return tuple(compact_slice(cfg, kind, s, s + chunk_size) for s in range(0, total, chunk_size))


def iter_compact(
    cfg: SimConfig, kind: str, chunk_size: int = DEFAULT_CHUNK, cache: bool = True
) -> Iterator[CompactChunk]:
    """The whole population of ``kind`` in compact chunks of at most ``chunk_size``.

    Populations of at most ``CACHE_MAX`` sequences are built once and kept (about 0.4 kB
    per sequence); larger ones are rebuilt chunk by chunk on every pass (bounded memory)."""
    total = population_size(cfg, kind)
    if cache and total <= CACHE_MAX:
        yield from _cached_chunks(cfg, kind, chunk_size)
        return
    for start in range(0, total, chunk_size):
        yield compact_slice(cfg, kind, start, start + chunk_size)


def clear_cache() -> None:
    _cached_chunks.cache_clear()


def to_dense(chunk: CompactChunk, cfg: SimConfig) -> torch.Tensor:
    """Dense inputs (N, L, dim): one-hot token + one-hot position + ebar components."""
    basis = Basis.from_config(cfg)
    N, L = chunk.tok.shape
    X = torch.zeros((N, L, basis.dim + 1), dtype=torch.float64)
    X.scatter_add_(2, chunk.tok[..., None], torch.ones((N, L, 1), dtype=torch.float64))
    pos = (basis.pos(0) + torch.arange(L)).expand(N, L)[..., None]
    X.scatter_add_(2, pos, torch.ones((N, L, 1), dtype=torch.float64))
    X.scatter_add_(2, chunk.bars, torch.ones((N, L, 2), dtype=torch.float64))
    return X[..., : basis.dim]


def iter_population(cfg: SimConfig, kind: str, chunk_size: int = 4096) -> Iterator[PopulationChunk]:
    """The whole population as dense chunks; weights sum to 1 over all chunks."""
    for chunk in iter_compact(cfg, kind, chunk_size):
        yield PopulationChunk(to_dense(chunk, cfg), chunk.labels, chunk.weights)


def brute_force_population(cfg: SimConfig, kind: str) -> PopulationChunk:
    """Independent reference enumeration with explicit loops (small configs only).

    Builds every sequence from the description in the module docstring with one-hot
    vectors from ``Basis.vector``; the order differs from ``iter_population``."""
    _check_kind(kind)
    basis = Basis.from_config(cfg)
    vectors = {lab: basis.vector(lab) for lab in basis.labels}
    p, K, L, T = cfg.p, cfg.K, cfg.L, cfg.T
    a_pos, b_pos = cfg.operand_pos
    if kind == "0var":
        operand_sets = [[(("n", x), ("n", y)) for x in range(p) for y in range(p)]]
    elif kind == "2var":
        operand_sets = [[(("v", x), ("v", y)) for x in range(K) for y in range(K)]]
    else:
        fixed = [(("n", n), ("v", v)) for n in range(p) for v in range(K)]
        swapped = [(("v", v), ("n", n)) for n in range(p) for v in range(K)]
        operand_sets = {"fixed": [fixed], "swapped": [swapped], "mixed": [fixed, swapped]}[
            cfg.operand_order
        ]
    xs, ys, ws = [], [], []
    for operand_set in operand_sets:
        n_seq = math.factorial(K) * p**K * len(operand_set)
        weight = 1.0 / (n_seq * len(operand_sets))
        for order in itertools.permutations(range(K)):
            for values in itertools.product(range(p), repeat=K):
                for operands in operand_set:
                    X = torch.zeros((L, basis.dim), dtype=torch.float64)
                    for t in range(L):
                        X[t] = vectors[f"pos{t}"]
                    for t in range(cfg.n_assign_positions):
                        X[t] += vectors["pad"]
                    for j, u in enumerate(order):
                        X[2 * j] += vectors[f"v{u}"] - vectors["pad"]
                        X[2 * j + 1] += (
                            vectors[f"n{values[u]}"] + vectors[f"bar_v{u}"] - vectors["pad"]
                        )
                    X[cfg.plus_pos] += vectors["+"]
                    X[T] += vectors["="]
                    label = 0
                    for t, (kind_tok, z) in zip((a_pos, b_pos), operands, strict=True):
                        X[t] += vectors[f"{kind_tok}{z}"]
                        if kind_tok == "v":
                            X[T] += vectors[f"bar_v{z}"]
                            label += values[z]
                        else:
                            label += z
                    xs.append(X)
                    ys.append(label % p)
                    ws.append(weight)
    return PopulationChunk(
        torch.stack(xs), torch.tensor(ys, dtype=torch.long), torch.tensor(ws, dtype=torch.float64)
    )
