"""Exact expectations over the uniform data distribution, by Kronecker-delta counting.

A random quantity is a finite sum of terms

    coeff * sum_{u_1, .., u_r in [K]}  prod_i [f_i = 0 (mod p)] * prod [u = u'] * prod [slot(u) = q]

where the f_i are affine forms in the value variables (n, the assignment values m_u, a uniform
label y, ...) that are i.i.d. uniform on Z_p, the u's are assignment indices, and slot(u) is the
slot pair that assignment u occupies in the uniformly random layout.  The expectation of a term
is computed in three exact steps:

1. Index counting.  Every index (summed ones, the random operand variables v which are uniform
   on [K] and carry weight 1/K, and fixed labels such as a matrix row's variable) is assigned
   to a block of a set partition; indices in one block are equal, in different blocks
   distinct.  A partition with r free blocks (not pinned to a fixed label) is realised by the
   falling factorial (K - #fixed)_r assignments.  So K stays a symbol.
2. Layout.  slot(.) is a uniformly random injection of the K assignments into the K slot
   pairs, independent of everything else, so E prod_{j<=s} [slot(u_j) = q_j] = 1/(K)_s for
   distinct u_j and distinct q_j (0 if the pattern is contradictory).
3. Values.  Within a partition the value variables are distinct i.i.d. uniform variables x,
   and the product of deltas is [A x + c = 0 (mod p)].  With the Smith normal form
   U A V = D, y = V^{-1} x is again uniform, and the system is D y = -U c: each nonzero
   invariant factor d_i contributes gcd(d_i, p)/p (if gcd(d_i, p) divides (U c)_i), each zero
   row requires (U c)_i = 0.  For symbolic p the answer is p^{-rank} (or 0), valid for every
   p coprime to the invariant factors; those moduli are recorded in EXCEPTIONAL_MODULI.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache

import sympy as sp
from sympy.matrices.normalforms import smith_normal_decomp

from theory.symbols import K, p

ONE = "1"  # key of the integer constant in a Form
EXCEPTIONAL_MODULI: set[int] = set()  # |d_i| > 1 or inconsistent integer constants met so far

_counter = itertools.count()


def fresh(prefix: str) -> str:
    """A new, globally unique index name."""
    return f"{prefix}#{next(_counter)}"


def mvar(index: str) -> str:
    """Name of the value variable m_index (the number assigned to variable `index`)."""
    return f"m:{index}"


# --------------------------------------------------------------------------------------------
# Affine forms over Z_p


Form = tuple[tuple[str, int], ...]  # sorted (name, coeff); names: value vars, '$const', ONE


def form(*parts: Mapping[str, int] | Form) -> Form:
    """Sum of affine forms given as dicts or Forms; zero coefficients dropped, sorted."""
    acc: dict[str, int] = {}
    for part in parts:
        items = part.items() if isinstance(part, Mapping) else part
        for name, c in items:
            acc[name] = acc.get(name, 0) + c
    return tuple(sorted((n, c) for n, c in acc.items() if c != 0))


def scale(f: Form, s: int) -> Form:
    return tuple((n, c * s) for n, c in f if c * s != 0)


def _rename_form(f: Form, mapping: Mapping[str, str]) -> Form:
    out = []
    for name, c in f:
        if name.startswith("m:") and name[2:] in mapping:
            name = mvar(mapping[name[2:]])
        out.append((name, c))
    return form(tuple(out))


def _form_indices(f: Form) -> set[str]:
    return {n[2:] for n, _ in f if n.startswith("m:")}


# --------------------------------------------------------------------------------------------
# Terms and sums of terms


@dataclass(frozen=True)
class Term:
    coeff: sp.Expr
    sums: tuple[str, ...] = ()
    deltas: tuple[Form, ...] = ()
    eqs: tuple[tuple[str, str], ...] = ()
    slots: tuple[tuple[str, str], ...] = ()

    def indices(self) -> set[str]:
        out = set(self.sums)
        for f in self.deltas:
            out |= _form_indices(f)
        for i, j in self.eqs:
            out |= {i, j}
        out |= {i for i, _ in self.slots}
        return out

    def rename(self, mapping: Mapping[str, str]) -> Term:
        r = lambda i: mapping.get(i, i)  # noqa: E731
        return Term(
            self.coeff,
            tuple(r(i) for i in self.sums),
            tuple(_rename_form(f, mapping) for f in self.deltas),
            tuple((r(i), r(j)) for i, j in self.eqs),
            tuple((r(i), q) for i, q in self.slots),
        )

    def __mul__(self, other: Term) -> Term:
        clash = set(other.sums) & self.indices()
        if clash:
            other = other.rename({i: fresh(i.split("#")[0]) for i in clash})
        clash = set(self.sums) & other.indices()
        me = self.rename({i: fresh(i.split("#")[0]) for i in clash}) if clash else self
        return Term(
            me.coeff * other.coeff,
            me.sums + other.sums,
            me.deltas + other.deltas,
            me.eqs + other.eqs,
            me.slots + other.slots,
        )


@dataclass
class RSum:
    """A random quantity: a sum of Terms."""

    terms: list[Term] = field(default_factory=list)

    @staticmethod
    def const(c) -> RSum:
        c = sp.sympify(c)
        return RSum([Term(c)] if c != 0 else [])

    @staticmethod
    def delta(f: Form, coeff=1) -> RSum:
        return RSum([Term(sp.sympify(coeff), deltas=(f,))])

    @staticmethod
    def eq(i: str, j: str) -> RSum:
        return RSum([Term(sp.S.One, eqs=((i, j),))])

    @staticmethod
    def slot(i: str, q: str) -> RSum:
        return RSum([Term(sp.S.One, slots=((i, q),))])

    def summed(self, index: str) -> RSum:
        """sum_{index in [K]} of self."""
        return RSum(
            [Term(t.coeff, (index,) + t.sums, t.deltas, t.eqs, t.slots) for t in self.terms]
        )

    def __add__(self, other) -> RSum:
        other = other if isinstance(other, RSum) else RSum.const(other)
        return RSum(self.terms + other.terms)

    __radd__ = __add__

    def __neg__(self) -> RSum:
        return RSum([Term(-t.coeff, t.sums, t.deltas, t.eqs, t.slots) for t in self.terms])

    def __sub__(self, other) -> RSum:
        other = other if isinstance(other, RSum) else RSum.const(other)
        return self + (-other)

    def __mul__(self, other) -> RSum:
        if not isinstance(other, RSum):
            c = sp.sympify(other)
            return RSum([Term(t.coeff * c, t.sums, t.deltas, t.eqs, t.slots) for t in self.terms])
        return RSum([s * o for s in self.terms for o in other.terms])

    __rmul__ = __mul__


def rsum(items: Iterable[RSum]) -> RSum:
    out = RSum()
    for it in items:
        out = out + it
    return out


# --------------------------------------------------------------------------------------------
# Step 3: probability that a system of deltas holds


def _falling(x: sp.Expr, r: int) -> sp.Expr:
    return sp.Mul(*[x - i for i in range(r)])


@cache
def delta_probability(deltas: tuple[Form, ...], p_value: int | None = None) -> sp.Expr:
    """P[A x + c = 0 (mod p)] for x uniform on Z_p^d; forms give the rows of (A | c).

    Symbolic p (p_value None): p^{-rank} or 0, valid for p coprime to the invariant factors
    (recorded in EXCEPTIONAL_MODULI).  Integer p_value: exact for that p.
    """
    if not deltas:
        return sp.S.One
    names = sorted({n for f in deltas for n, _ in f if n != ONE and not n.startswith("$")})
    consts = sorted({n for f in deltas for n, _ in f if n.startswith("$")})
    cvec = [
        sp.Integer(dict(f).get(ONE, 0)) + sum(dict(f).get(c, 0) * sp.Symbol(c) for c in consts)
        for f in deltas
    ]
    if not names:
        A = sp.zeros(len(deltas), 0)
        D, U = A, sp.eye(len(deltas))
    else:
        A = sp.Matrix([[dict(f).get(n, 0) for n in names] for f in deltas])
        D, U, _V = smith_normal_decomp(A)
    t = U * sp.Matrix(cvec)
    diag = [D[i, i] for i in range(min(D.shape))]
    rank = sum(1 for d in diag if d != 0)
    prob = sp.S.One
    for i in range(len(deltas)):
        d = diag[i] if i < len(diag) else 0
        ti = sp.expand(t[i])
        if d != 0:
            if p_value is None:
                if abs(int(d)) > 1:
                    EXCEPTIONAL_MODULI.add(abs(int(d)))
                prob /= p
            else:
                g = math.gcd(int(d), p_value)
                if g > 1:
                    if ti.free_symbols:
                        raise NotImplementedError(f"solvability depends on a constant: {ti}")
                    if int(ti) % g:
                        return sp.S.Zero
                prob *= sp.Rational(g, p_value)
        else:
            if ti == 0:
                continue
            if ti.free_symbols:
                raise NotImplementedError(f"consistency depends on a constant: {ti} = 0")
            if p_value is None:
                EXCEPTIONAL_MODULI.add(abs(int(ti)))
                return sp.S.Zero
            if int(ti) % p_value:
                return sp.S.Zero
    assert p_value is not None or prob == p ** (-rank)
    return prob


# --------------------------------------------------------------------------------------------
# Steps 1-2: index partitions and layout


@dataclass(frozen=True)
class Context:
    """Which indices are random operand variables (uniform on [K]) and which are fixed labels.

    fixed maps a label name (e.g. a matrix row's variable) to an integer; equal integers mean
    equal labels.  All labels are assumed to lie in [K].
    """

    random: tuple[str, ...] = ()
    fixed: tuple[tuple[str, int], ...] = ()


def _partitions(n: int, n_fixed: int):
    """Restricted-growth assignments of n indices to blocks; blocks < n_fixed are pinned."""

    def rec(i, assign, nblocks):
        if i == n:
            yield tuple(assign), nblocks - n_fixed
            return
        for bl in range(nblocks):
            assign.append(bl)
            yield from rec(i + 1, assign, nblocks)
            assign.pop()
        assign.append(nblocks)
        yield from rec(i + 1, assign, nblocks + 1)
        assign.pop()

    yield from rec(0, [], n_fixed)


def _canonical(deltas: Iterable[Form]) -> tuple[Form, ...]:
    """Rename value variables in order of appearance so equal systems share a cache entry."""
    mapping: dict[str, str] = {}
    out = []
    for f in sorted(deltas):
        for n, _ in f:
            if n != ONE and not n.startswith("$") and n not in mapping:
                mapping[n] = f"x{len(mapping)}"
        out.append(form(tuple((mapping.get(n, n), c) for n, c in f)))
    return tuple(sorted(out))


def expect_term(t: Term, ctx: Context, p_value: int | None = None) -> sp.Expr:
    """E[t] over the data distribution described by ctx (see module docstring)."""
    n_fixed = len(set(dict(ctx.fixed).values()))
    return t.coeff * sp.Add(
        *[c * _group_value(key, n_fixed) for key, c in _partition_counts(t, ctx, p_value).items()]
    )


def _group_value(key, n_fixed: int) -> sp.Expr:
    """Weight of one partition class: (K - #fixed)_r / K^n_random / (K)_s * P[deltas]."""
    n_free_blocks, n_random, n_slots, prob = key
    return _falling(K - n_fixed, n_free_blocks) / K**n_random / _falling(K, n_slots) * prob


def _partition_counts(t: Term, ctx: Context, p_value: int | None = None) -> Counter:
    """Partitions of the term's indices that contribute, counted by (number of free blocks,
    number of random indices, number of slot indicators, delta probability)."""
    counts: Counter = Counter()
    fixed = dict(ctx.fixed)
    labels = sorted(set(fixed.values()))
    label_block = {lab: i for i, lab in enumerate(labels)}
    n_fixed = len(labels)
    idx = t.indices()
    free = sorted(i for i in idx if i not in fixed)
    assert set(free) <= set(t.sums) | set(ctx.random), f"unbound index in {free}"
    n_random = sum(1 for i in free if i in ctx.random)
    for assign, n_free_blocks in _partitions(len(free), n_fixed):
        block = {i: label_block[fixed[i]] for i in idx if i in fixed}
        block.update(zip(free, assign, strict=True))
        if any(block[i] != block[j] for i, j in t.eqs):
            continue
        # layout
        slot_of: dict[int, str] = {}
        ok = True
        for i, q in t.slots:
            bl = block[i]
            if slot_of.get(bl, q) != q:
                ok = False
                break
            slot_of[bl] = q
        if not ok or len(set(slot_of.values())) != len(slot_of):
            continue
        # values
        mapping = {i: f"B{block[i]}" for i in idx}
        deltas = _canonical(_rename_form(f, mapping) for f in t.deltas)
        prob = delta_probability(deltas, p_value)
        if prob == 0:
            continue
        counts[(n_free_blocks, n_random, len(slot_of), prob)] += 1
    return counts


def expect(x: RSum, ctx: Context, p_value: int | None = None) -> sp.Expr:
    """E[x], simplified (rational function of a, b, K and p, factored).

    Terms are grouped by partition class first, so sympy adds one coefficient polynomial per
    class instead of one rational expression per partition."""
    n_fixed = len(set(dict(ctx.fixed).values()))
    coeffs: dict = {}
    for t in x.terms:
        for key, c in _partition_counts(t, ctx, p_value).items():
            coeffs.setdefault(key, []).append(c * t.coeff)
    total = sp.Add(*[sp.Add(*cs) * _group_value(key, n_fixed) for key, cs in coeffs.items()])
    return sp.factor(sp.together(total))
