"""Closed forms of the first-order gradients of other pieces than W at W^0 (issue 36, item 1),
and G1's memory block at a given operating point (attention at `=`, Gram matrix of the ebar).

The model with every piece free is `disentangled.pieces` (row vectors): x0_t = tok[z_t] +
pos[t]; layer 1 writes x1_t = x0_t + a_t ov1 with a_t = sum_s A_ts x0_s (A routes an assigned
number to its variable and itself, the query to its two operands, 1/2 each, every other
position to `+`, whose ov1 image is 0); layer 2 is W^0's attention and the readout F. With the
first-order loss l = mean_y F_y - F_{y*} (whose negative gradient is each piece's G1), and
r = sum_t sigma_t (g_t - gbar) x1_t, psi_m = dF_{y*}/dh_m - mean_y dF_y/dh_m as in
`theory.g1_closed_form`, the chain rule gives, for every key t,

    dl/dx1_t = -sigma_t (g_t - gbar) q - sigma_t sum_m psi_m e_{n_m},
    q = x1_T qk2 = beta (pi_{L-3} + pi_{L-2})

(score, then value), and for the query T in addition -beta <r, pi_{L-3} + pi_{L-2}> e_= (its
score row) and the residual's -psi_m on F's inputs and 1/p - [y = y*] on F's outputs. Three
facts close the sums: E[psi_m] = 0 for every m (shift invariance makes it independent of m, and
sum_m psi_m = 0), y* is uniform, and layer 1's softmax derivative meets only ebar directions
(the only thing ov1 writes), which dl/dx1 never has. So:

* **Layer 1's OV, the variable rows** (what v_u writes: the binding writer). e_{v_u} enters
  a_t at u's number slot (1/2) and at the query when u is queried (1/2, probability 1/K); every
  entry but three is 0 and the row is the same for every u:

      G1_ov1[v_u, pi_{L-3}] = G1_ov1[v_u, pi_{L-2}]
                            = beta/(2K) (K G1[=, pos_numslot] + G1[=, pos_T])
                            = -beta a b (p-1) (2(K+1) b - 1) / (K p)
      G1_ov1[v_u, =]        = beta/(2K) (G1[=, pos_{L-3}] + G1[=, pos_{L-2}])
                            = -beta a b (p-1) (4a - 1) / (K p)

* **The variable embeddings** tok[v_u]: v_u sits at its variable slot (sigma = b, no number,
  routed to `+`) and, when queried, at the variable operand (sigma = a):

      G1_tok[v_u, pi_{L-3}] = G1_tok[v_u, pi_{L-2}] = -beta (b + a/K) E[gbar]
                            = -4 beta a b (p-1) (K b + a) / (K p),   E[gbar] = -G1[=, pos_T] / b

  and 0 elsewhere: "be attended less", the same for every variable.

Neither row has an ebar component or depends on u: at W^0 only W's memory block tells one
variable from another. Each G1 entry is `theory.g1_closed_form.entry` (sympy); E[gbar] is also
derived directly from the sites (`mean_gbar`), and the identity is checked.

**The operating point.** G1's memory block (query bar_v_r, key bar_v_u) at a given attention
at `=`: s_n on the number operand, s_v on the variable operand, s_A spread evenly over the K
assigned numbers, the rest spread evenly over the other L - 2 - K positions (W^0: s_n = s_v = a,
s_A = K b). It is M = c_off J + (c_diag - c_off) I (`memory_at`); with ebar vectors of Gram
matrix Gamma instead of orthonormal ones, the block read in the label basis (ebar_r^T G ebar_u)
is Gamma M Gamma (`memory_block`): x_T carries ebar_q and each assigned number ebar_{u_t}, so
<ebar_r, x_T> = Gamma[r, q] and <ebar_u, x_t> = Gamma[u, u_t].
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import sympy as sp

from theory.expectations import Context, expect
from theory.g1_closed_form import ROW_LABEL, entry, entry_key, gbar_of, r_coordinate
from theory.population import coordinate, populations
from theory.symbols import DEFAULT_L, K, a, ab_numeric, b, beta, p

s_n, s_v, s_A = sp.symbols("s_n s_v s_A", nonnegative=True)


def _g1(row: str, col: str, L: int, kind: str = "1var", order: str = "fixed") -> sp.Expr:
    """G1[row, col] (closed form; the column's class does not depend on K's value: K = 3)."""
    return entry(kind, order, L, *entry_key(row, col, 3, L))


@cache
def mean_gbar(L: int = DEFAULT_L, kind: str = "1var", order: str = "fixed") -> sp.Expr:
    """E[gbar] from the sites (`g1_closed_form.gbar_of`), gbar = sum_t sigma_t g_t."""
    total = sp.S.Zero
    for weight, pop in populations(kind, order, L):
        total += weight * expect(gbar_of(pop), Context(random=pop.random, fixed=()))
    return sp.factor(total)


@cache
def variable_embedding_g1(L: int = DEFAULT_L) -> dict[str, sp.Expr]:
    """{column label: G1_tok[v_u, column]} for the nonzero columns (1-var, fixed order)."""
    coeff = sp.factor(-beta * (b + a / K) * mean_gbar(L))
    return {f"pos{L - 3}": coeff, f"pos{L - 2}": coeff}


@cache
def ov1_variable_row_g1(L: int = DEFAULT_L) -> dict[str, sp.Expr]:
    """{column label: G1_ov1[v_u, column]} for the nonzero columns (1-var, fixed order)."""
    T = L - 1
    pos = sp.factor(beta / (2 * K) * (K * _g1("=", "pos1", L) + _g1("=", f"pos{T}", L)))
    eq = sp.factor(beta / (2 * K) * (_g1("=", f"pos{L - 3}", L) + _g1("=", f"pos{L - 2}", L)))
    return {"=": eq, f"pos{L - 3}": pos, f"pos{L - 2}": pos}


def _numeric(exprs: dict[str, sp.Expr], p_value, K_value, beta_value, L) -> dict[str, float]:
    a_v, b_v = ab_numeric(beta_value, L)
    subs = {a: a_v, b: b_v, p: p_value, K: K_value, beta: beta_value}
    return {k: float(e.subs(subs)) for k, e in exprs.items()}


def closed_variable_rows(
    p_value: int, K_value: int, beta_value: float, L: int = DEFAULT_L
) -> dict[str, dict[str, float]]:
    """{"ov1": {column: value}, "tok": {column: value}}: the nonzero entries of the variable
    rows in float64 (every other entry of those rows is 0)."""
    return {
        "ov1": _numeric(ov1_variable_row_g1(L), p_value, K_value, beta_value, L),
        "tok": _numeric(variable_embedding_g1(L), p_value, K_value, beta_value, L),
    }


# --------------------------------------------------------------------------------------------
# G1's memory block at a given attention at `=` and a given Gram matrix of the ebar vectors


def _attention(site_name: str, L: int) -> sp.Expr:
    rest = (1 - s_n - s_v - s_A) / (L - 2 - K)
    if site_name.startswith("number operand"):
        return s_n
    if site_name.startswith("variable operand"):
        return s_v
    if site_name == "assignment number":
        return s_A / K
    return rest


@cache
def memory_at(L: int = DEFAULT_L, order: str = "fixed") -> tuple[sp.Expr, sp.Expr]:
    """(c_diag, c_off) of G1's memory block (1-var) at the attention (s_n, s_v, s_A) at `=`
    (module docstring), as sympy expressions in s_n, s_v, s_A, p, K."""
    out = []
    for same in (True, False):
        total = sp.S.Zero
        for weight, pop in populations("1var", order, L):
            sites = tuple(replace(s, sigma=_attention(s.name, L)) for s in pop.sites)
            pop = replace(pop, sites=sites)
            row, col = ("bar_v", ROW_LABEL), ("bar_v", "vc")
            fixed = (("vr", 0), ("vc", 0 if same else 1))
            rc = coordinate(pop.query, row, L)
            total += weight * expect(rc * r_coordinate(pop, col), Context(pop.random, fixed))
        out.append(sp.factor(total))
    return out[0], out[1]


def memory_block(
    p_value: int, K_value: int, s_num: float, s_var: float, s_assigned: float,
    gram: np.ndarray | None = None, L: int = DEFAULT_L,
) -> np.ndarray:  # fmt: skip
    """G1's K x K memory block in the label basis at the attention (s_num, s_var, s_assigned)
    at `=` and the ebar Gram matrix `gram` (default the identity): Gamma M Gamma."""
    diag, off = memory_at(L)
    subs = {s_n: s_num, s_v: s_var, s_A: s_assigned, p: p_value, K: K_value}
    c_d, c_o = float(diag.subs(subs)), float(off.subs(subs))
    M = np.full((K_value, K_value), c_o) + (c_d - c_o) * np.eye(K_value)
    G = np.eye(K_value) if gram is None else np.asarray(gram, dtype=np.float64)
    if G.shape != (K_value, K_value):
        raise ValueError(f"gram has shape {G.shape}; must be ({K_value}, {K_value})")
    return G @ M @ G


def memory_summary(block: np.ndarray) -> dict[str, float]:
    """Mean diagonal, mean off-diagonal, their ratio and the smallest row contrast (diagonal
    minus the row's largest off-diagonal entry; > 0: every query's own key leads)."""
    k = block.shape[0]
    off = block.copy()
    np.fill_diagonal(off, -np.inf)
    d = float(np.diag(block).mean())
    o = float((block.sum() - np.trace(block)) / (k * (k - 1)))
    return {"diag": d, "offdiag": o, "ratio": o / d if d else float("nan"),
            "contrast_min": float((np.diag(block) - off.max(axis=1)).min())}  # fmt: skip
