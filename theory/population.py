"""The augmented-input sequences of the spec, described symbolically as weighted sites.

A sequence is a list of sites t = 0..L-1, each with its attention weight at W^0 (a at the
two operand positions L-3, L-2, b elsewhere, the query included) and its input vector x_t:

    assignment variable u at slot 2 q:       x = e_{v u} + pi_{2q}                (q = slot(u))
    assignment number   u at slot 2 q + 1:   x = e_{n m_u} + pi_{2q+1} + ebar_u
    pad at 2K .. L-5:                        x = e_pad + pi_t
    `+` at L-4:                              x = e_+ + pi_{L-4}
    operands at L-3, L-2                     x = e_{n n} + pi  or  e_{v v} + pi
    query at L-1:                            x_T = e_= + pi_{L-1} + (ebar of the variable operands)

Families ("one site per assignment u in [K]") carry the placeholder index U; pad sites are one
family of L - 4 - 2K identical sites.  Value variables: n, n1, n2 (number operands), m_u.
Random indices: v (1-var), v1, v2 (2-var), uniform on [K].
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from theory.expectations import RSum, form, fresh, mvar
from theory.symbols import K, a, b

KINDS = ("0var", "1var", "2var")
ORDERS = ("fixed", "swapped", "mixed")


@dataclass(frozen=True)
class Site:
    name: str
    sigma: sp.Expr
    token: tuple  # ('num', Form) | ('var', index) | ('=',) | ('+',) | ('pad',)
    position: tuple  # ('at', j) | ('varslot', index) | ('numslot', index) | ('pad',)
    ebar: tuple[str, ...] = ()
    family: bool = False  # one copy per assignment, placeholder index "U"
    mult: sp.Expr = sp.S.One  # identical copies at distinct positions (pad)

    @property
    def number(self):
        return self.token[1] if self.token[0] == "num" else None

    def instance(self, index: str) -> Site:
        """The copy for assignment `index` (families only)."""
        sub = lambda i: index if i == "U" else i  # noqa: E731
        tok = self.token
        if tok[0] == "num":
            tok = ("num", form(tuple((mvar(index) if n == "m:U" else n, c) for n, c in tok[1])))
        elif tok[0] == "var":
            tok = ("var", sub(tok[1]))
        pos = (
            self.position if len(self.position) == 1 else (self.position[0], sub(self.position[1]))
        )
        return replace(self, token=tok, position=pos, ebar=tuple(sub(e) for e in self.ebar))


@dataclass(frozen=True)
class Population:
    """One sequence type: its sites, its query site and the label y* as an affine form."""

    kind: str
    order: str
    L: int
    sites: tuple[Site, ...]
    query: Site
    label: tuple
    random: tuple[str, ...]


def populations(kind: str = "1var", order: str = "fixed", L: int = 16):
    """[(weight, Population)] for the data distribution: 'mixed' is 1/2 fixed + 1/2 swapped."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "mixed" and kind == "1var":
        return [(sp.Rational(1, 2), _population(kind, "fixed", L)),
                (sp.Rational(1, 2), _population(kind, "swapped", L))]  # fmt: skip
    return [(sp.S.One, _population(kind, "fixed" if order == "mixed" else order, L))]


def _population(kind: str, order: str, L: int) -> Population:
    assign_var = Site("assignment variable", b, ("var", "U"), ("varslot", "U"), family=True)
    assign_num = Site(
        "assignment number", b, ("num", form({"m:U": 1})), ("numslot", "U"), ("U",), family=True
    )
    pad = Site("pad", b, ("pad",), ("pad",), mult=L - 4 - 2 * K)
    plus = Site("+", b, ("+",), ("at", L - 4))

    def num_op(name, j):
        return Site(f"number operand {name}", a, ("num", form({name: 1})), ("at", j))

    def var_op(name, j):
        return Site(f"variable operand {name}", a, ("var", name), ("at", j))

    first, second = L - 3, L - 2
    if kind == "0var":
        ops = [num_op("n1", first), num_op("n2", second)]
        label, random, qbar = {"n1": 1, "n2": 1}, (), ()
    elif kind == "2var":
        ops = [var_op("v1", first), var_op("v2", second)]
        label, random, qbar = {mvar("v1"): 1, mvar("v2"): 1}, ("v1", "v2"), ("v1", "v2")
    else:
        if order == "swapped":
            first, second = second, first
        ops = [num_op("n", first), var_op("v", second)]
        label, random, qbar = {"n": 1, mvar("v"): 1}, ("v",), ("v",)
    query = Site("query", b, ("=",), ("at", L - 1), qbar)
    sites = (assign_var, assign_num, pad, plus, *ops, query)
    return Population(kind, order, L, sites, query, form(label), random)


# --------------------------------------------------------------------------------------------
# Coordinates of x_t in the basis, as random quantities


def coordinate(site: Site, col: tuple, L: int) -> RSum:
    """sum over the site's copies of <x_t, basis vector col>, for one family instance.

    col descriptors: ('n', '$c') number token with value constant c; ('v', label) variable
    token; ('tok', '='|'+'|'pad'); ('pos_at', j); ('pos_numslot', q); ('pos_varslot', q);
    ('pos_pad',); ('bar_v', label); ('bar_n',).
    """
    kind = col[0]
    tok, pos = site.token, site.position
    if kind == "n":
        return RSum.delta(form(tok[1], {col[1]: -1})) if tok[0] == "num" else RSum()
    if kind == "v":
        return RSum.eq(tok[1], col[1]) if tok[0] == "var" else RSum()
    if kind == "tok":
        return RSum.const(site.mult) if tok[0] == col[1] else RSum()
    if kind == "pos_at":
        return RSum.const(1) if pos == ("at", col[1]) else RSum()
    if kind in ("pos_numslot", "pos_varslot"):
        want = "numslot" if kind == "pos_numslot" else "varslot"
        return RSum.slot(pos[1], col[1]) if pos[0] == want else RSum()
    if kind == "pos_pad":
        return RSum.const(1) if pos == ("pad",) else RSum()  # one pad copy sits at position j
    if kind == "bar_v":
        out = RSum()
        for e in site.ebar:
            out = out + RSum.eq(e, col[1])
        return out
    if kind == "bar_n":
        return RSum()
    raise ValueError(f"unknown column descriptor {col}")


def over_copies(site: Site, f) -> RSum:
    """sum over the site's family instances of f(instance) (just f(site) for a single site)."""
    if not site.family:
        return f(site)
    u = fresh("u")
    return f(site.instance(u)).summed(u)


def position_class(j: int, K_value: int, L: int) -> tuple:
    """Column descriptor of pos{j} for a given K (layout: slot pairs (2q, 2q+1), q < K)."""
    if not 0 <= j < L:
        raise ValueError(f"position {j} outside 0..{L - 1}")
    if j < 2 * K_value:
        return ("pos_numslot", "q") if j % 2 else ("pos_varslot", "q")
    if j < L - 4:
        return ("pos_pad",)
    return ("pos_at", j)
