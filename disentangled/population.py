"""Exact enumeration of the populations (augmented inputs of eq. (1) and of chain.md), for
C.1's model (``SimConfig``) and the two-hop chain (``ChainConfig``, ``pointers`` > 0 allowed).

Structure of a sequence: a set of ``pointers`` variables (all subsets of that size; none for
C.1), the target of every pointer (any number-bound variable; all choices), the order of the K
assignments in the slot pairs (all K! orders, uniformly) and the values of the number-bound
variables (all of Z_p^(K - pointers), uniform weights).  Assignment ``u=z`` in slot pair
(2j, 2j+1): ``x_{2j} = e_{v_u} + pi_{2j}`` and ``x_{2j+1} = e_z + pi_{2j+1} + ebar_{v_u}`` (z
the number m_u, or the target variable w of a pointer u); the rest of 0..L-5 is
``e_pad + pi_t``; L-4 is ``e_+ + pi_{L-4}``; L-3 and L-2 hold the operands ``e_z + pi_t``;
the query at T = L-1 is ``e_= + pi_T + sum ebar_v`` over its variable operands (not their
targets).  The label resolves every variable operand to its number (through its pointer).

Kinds (``cfg.kinds``):

* 0var: operands (n1, n2) in Z_p^2, label n1 + n2, no ebar in the query.
* 1var (C.1) = 1var-1hop, and 1var-2hop: a number n and a number-bound / pointer variable v;
  ``fixed`` order puts n at L-3 and v at L-2, ``swapped`` the reverse, ``mixed`` both (each
  with weight 1/2).
* 2var (C.1) = 2var-1hop: (v1, v2) number-bound (v1 = v2 allowed: the query carries 2 ebar_v);
  2var-2hop: v1, v2 drawn from all K variables, at least one a pointer.

Every sequence of a kind has the same weight.  C.1's sizes: K! p^K * (p^2, p K * orders, K^2).
Index i = ((structure * K! + order) * p^(K - pointers) + values) * n_ops + operands, so with
no pointers the chain's 0var, 1var-1hop and 2var-1hop are C.1's 0var, 1var and 2var, in order.

``iter_compact`` gives a population in compact chunks (token index per position plus ebar
indices, what the fast evaluator uses), ``whole_population`` as one cached chunk (the two-hop
gradients), ``iter_population`` as dense float64 inputs (N, L, dim); ``brute_force_population``
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
from .config import ChainConfig, SimConfig

DEFAULT_CHUNK = 32768
CACHE_MAX = 300_000
MAX_SEQUENCES = 1_500_000
"""``whole_population`` builds a population whole (about 0.5 kB per sequence): the CLI refuses
larger ones."""

Config = SimConfig | ChainConfig


@dataclass
class PopulationChunk:
    """Dense chunk: inputs (N, L, dim) float64, labels (N,) long, weights (N,) float64."""

    inputs: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor


@dataclass
class CompactChunk:
    """Compact chunk.  x_t = e_{tok[:, t]} + pi_t + sum_k e_{bars[:, t, k]}, where the index
    ``dim`` (one past the basis) stands for "no component".  ``bound[:, t]`` marks the number
    slot that a queried variable resolves to; ``operand_number[:, t]`` the operand positions
    holding a number; ``pointer_rhs[:, t]`` the right-hand side of a queried pointer ``v=w``
    (where the middle hop should attend); ``resolved[:, k]`` the variable that operand k
    resolves to (-1: a number operand)."""

    tok: torch.Tensor
    bars: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor
    bound: torch.Tensor
    operand_number: torch.Tensor | None = None
    pointer_rhs: torch.Tensor | None = None
    resolved: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.labels.shape[0]


def check_kind(cfg: Config, kind: str) -> None:
    if kind not in cfg.kinds:
        raise ValueError(f"kind={kind!r}: must be one of {', '.join(cfg.kinds)}")


def available_kinds(cfg: Config) -> tuple[str, ...]:
    """The kinds that have sequences (no 2-hop kinds without pointers)."""
    return tuple(k for k in cfg.kinds if cfg.pointers > 0 or "2hop" not in k)


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


def operands(cfg: Config, kind: str, tgt: tuple[int, ...]) -> list[tuple]:
    """Operand choices ((num_a, var_a), (num_b, var_b)) for positions (L-3, L-2) of one
    structure; exactly one of num/var is >= 0 in each pair."""
    check_kind(cfg, kind)
    p, K = cfg.p, cfg.K
    bound = [u for u in range(K) if tgt[u] < 0]
    ptrs = [u for u in range(K) if tgt[u] >= 0]
    if kind == "0var":
        return [((x, -1), (y, -1)) for x in range(p) for y in range(p)]
    if kind.startswith("2var"):
        pairs = [(x, y) for x in range(K) for y in range(K)]
        one_hop = [(x, y) for x, y in pairs if x in bound and y in bound]
        chosen = [q for q in pairs if q not in one_hop] if kind == "2var-2hop" else one_hop
        return [((-1, x), (-1, y)) for x, y in chosen]
    variables = ptrs if kind == "1var-2hop" else bound
    fixed = [((n, -1), (-1, v)) for n in range(p) for v in variables]
    swapped = [((-1, v), (n, -1)) for n in range(p) for v in variables]
    return {"fixed": fixed, "swapped": swapped, "mixed": fixed + swapped}[cfg.operand_order]


def population_size(cfg: Config, kind: str) -> int:
    """(number of structures) * K! * p^(K - pointers) * (operand choices per structure)."""
    structs = structures(cfg.K, cfg.pointers)
    n_ops = len(operands(cfg, kind, structs[0]))
    return len(structs) * math.factorial(cfg.K) * cfg.p ** (cfg.K - cfg.pointers) * n_ops


def _perms(K: int) -> torch.Tensor:
    return torch.tensor(list(itertools.permutations(range(K))), dtype=torch.long).reshape(-1, K)


def compact_slice(cfg: Config, kind: str, start: int, stop: int) -> CompactChunk:
    """Sequences with population indices start..stop-1 (index as in the module docstring,
    values in base p: digit i is the value of the i-th number-bound variable)."""
    basis = Basis.from_config(cfg)
    p, K, L, T, B, dim = cfg.p, cfg.K, cfg.L, cfg.T, cfg.K - cfg.pointers, basis.dim
    structs = structures(K, cfg.pointers)
    tgts = torch.tensor(structs, dtype=torch.long).reshape(-1, K)
    free = torch.tensor([[u for u in range(K) if s[u] < 0] for s in structs], dtype=torch.long)
    ops = torch.tensor([operands(cfg, kind, s) for s in structs], dtype=torch.long)
    n_ops = ops.shape[1]
    total = population_size(cfg, kind)
    idx = torch.arange(start, min(stop, total), dtype=torch.long)
    N = idx.numel()
    rest = idx // n_ops
    digits = (rest % p**B)[:, None] // (p ** torch.arange(B))[None, :] % p  # (N, B)
    rest = rest // p**B
    n_perms = math.factorial(K)
    struct = rest // n_perms
    op = ops[struct, idx % n_ops]  # (N, 2, 2)
    tgt = tgts[struct]  # (N, K)
    values = torch.zeros((N, K), dtype=torch.long).scatter_(1, free[struct], digits)
    perm = _perms(K)[rest % n_perms]  # (N, K): variable in slot pair j
    slot_of = 2 * perm.argsort(1) + 1  # (N, K): right-hand side position of variable u
    rhs = torch.where(tgt >= 0, basis.v(0) + tgt.clamp(min=0), basis.n(0) + values)
    rows = torch.arange(N)

    tok = torch.full((N, L), basis.pad, dtype=torch.long)
    bars = torch.full((N, L, 2), dim, dtype=torch.long)
    tok[:, 0 : 2 * K : 2] = basis.v(0) + perm
    tok[:, 1 : 2 * K : 2] = rhs.gather(1, perm)
    bars[:, 1 : 2 * K : 2, 0] = basis.bar_v(0) + perm
    tok[:, cfg.plus_pos] = basis.plus
    tok[:, T] = basis.eq

    def at(M: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # M[n, u[n]]
        return M.gather(1, u[:, None])[:, 0]

    resolve = torch.where(tgt >= 0, tgt, torch.arange(K))  # variable -> its number-bound one
    labels = torch.zeros(N, dtype=torch.long)
    bound = torch.zeros((N, L), dtype=torch.bool)
    operand_number = torch.zeros((N, L), dtype=torch.bool)
    pointer_rhs = torch.zeros((N, L), dtype=torch.bool)
    resolved = torch.full((N, 2), -1, dtype=torch.long)
    for k, t in enumerate(cfg.operand_pos):
        num, var = op[:, k, 0], op[:, k, 1]
        is_num = num >= 0
        vv = var.clamp(min=0)
        final = at(resolve, vv)
        tok[:, t] = torch.where(is_num, basis.n(0) + num, basis.v(0) + vv)
        bars[:, T, k] = torch.where(is_num, dim, basis.bar_v(0) + vv)
        labels += torch.where(is_num, num, at(values, final))
        bound[rows[~is_num], at(slot_of, final)[~is_num]] = True
        hop2 = ~is_num & (at(tgt, vv) >= 0)
        pointer_rhs[rows[hop2], at(slot_of, vv)[hop2]] = True
        resolved[:, k] = torch.where(is_num, -1, final)
        operand_number[:, t] = is_num
    labels %= p
    weights = torch.full((N,), 1.0 / total, dtype=torch.float64)
    return CompactChunk(tok, bars, labels, weights, bound, operand_number, pointer_rhs, resolved)


@functools.lru_cache(maxsize=12)
def _cached_chunks(cfg: Config, kind: str, chunk_size: int) -> tuple[CompactChunk, ...]:
    total = population_size(cfg, kind)
    return tuple(compact_slice(cfg, kind, s, s + chunk_size) for s in range(0, total, chunk_size))


def iter_compact(
    cfg: Config, kind: str, chunk_size: int = DEFAULT_CHUNK, cache: bool = True
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


@functools.lru_cache(maxsize=16)
def _whole(key: tuple, kind: str) -> CompactChunk:
    p, K, pointers, L, order = key
    cfg = ChainConfig(p=p, K=K, pointers=pointers, L=L, operand_order=order, hop1_share=1.0)
    return compact_slice(cfg, kind, 0, population_size(cfg, kind))


def whole_population(cfg: Config, kind: str) -> CompactChunk:
    """The whole population of ``kind`` as one compact chunk (weights sum to 1); cached per
    (p, K, pointers, L, operand order).  A C.1 kind is read as its chain kind."""
    check_kind(cfg, kind)
    if cfg.pointers == 0 and kind in ("1var-2hop", "2var-2hop"):
        raise ValueError(f"kind={kind!r}: there are no 2-hop sequences with pointers=0")
    kind = {"1var": "1var-1hop", "2var": "2var-1hop"}.get(kind, kind)
    return _whole((cfg.p, cfg.K, cfg.pointers, cfg.L, cfg.operand_order), kind)


def clear_cache() -> None:
    _cached_chunks.cache_clear()
    _whole.cache_clear()


def to_dense(chunk: CompactChunk, cfg: Config) -> torch.Tensor:
    """Dense inputs (N, L, dim): one-hot token + one-hot position + ebar components."""
    basis = Basis.from_config(cfg)
    N, L = chunk.tok.shape
    X = torch.zeros((N, L, basis.dim + 1), dtype=torch.float64)
    X.scatter_add_(2, chunk.tok[..., None], torch.ones((N, L, 1), dtype=torch.float64))
    pos = (basis.pos(0) + torch.arange(L)).expand(N, L)[..., None]
    X.scatter_add_(2, pos, torch.ones((N, L, 1), dtype=torch.float64))
    X.scatter_add_(2, chunk.bars, torch.ones((N, L, 2), dtype=torch.float64))
    return X[..., : basis.dim]


def iter_population(cfg: Config, kind: str, chunk_size: int = 4096) -> Iterator[PopulationChunk]:
    """The whole population as dense chunks; weights sum to 1 over all chunks."""
    for chunk in iter_compact(cfg, kind, chunk_size):
        yield PopulationChunk(to_dense(chunk, cfg), chunk.labels, chunk.weights)


def brute_force_population(cfg: Config, kind: str) -> PopulationChunk:
    """Independent reference enumeration with explicit loops (small configs only).

    Builds every sequence from the description in the module docstring with one-hot
    vectors from ``Basis.vector``; the order differs from ``iter_population``."""
    check_kind(cfg, kind)
    basis = Basis.from_config(cfg)
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
    n = len(xs)
    weights = torch.full((n,), 1.0 / n, dtype=torch.float64)
    return PopulationChunk(torch.stack(xs), torch.tensor(ys, dtype=torch.long), weights)


def _brute_operands(cfg: Config, kind: str, nums: list[int], ptrs: list[int]) -> list[tuple]:
    p = cfg.p
    if kind == "0var":
        return [(("n", x), ("n", y)) for x in range(p) for y in range(p)]
    if kind in ("2var", "2var-1hop"):
        return [(("v", x), ("v", y)) for x in nums for y in nums]
    if kind == "2var-2hop":
        allv = nums + ptrs
        return [(("v", x), ("v", y)) for x in allv for y in allv if x in ptrs or y in ptrs]
    vs = ptrs if kind == "1var-2hop" else nums
    fixed = [(("n", n), ("v", v)) for n in range(p) for v in vs]
    swapped = [(("v", v), ("n", n)) for n in range(p) for v in vs]
    return {"fixed": fixed, "swapped": swapped, "mixed": fixed + swapped}[cfg.operand_order]
