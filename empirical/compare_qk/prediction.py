"""The theory's prediction in the comparison's coordinates: the closed-form G1 of theory/.

`theory.g1_closed_form` derives (sympy) every entry class of G1 as a rational function of
(a, b, p, K); here it is evaluated at *measured* softmax weights a (per operand slot) and b
(per other position) and restricted to the labelled block of `coords` (rows `=`, `pos{L-1}`,
`bar_v{u}`; columns `n{m}`, `v{u}`, `=`, `+`, `pad`, `pos{t}`, `bar_v{u}`):

    G1 = gamma [ (e_= + pi_T + ebar_mean) rho^T
                 + (1-2b)/(2K^2) sum_v ebar_v (K ebar_v - sum_u ebar_u)^T
                 - a/K^2 sum_v ebar_v (K e_v - sum_u e_u)^T ],   gamma = 4ab(1-1/p).

The closed form assumes 2a + (L-2) b = 1 (softmax over L positions, two of them operands);
`ab_from_beta`/`beta_from_ab` convert, and measured weights satisfy it by construction.

Layout. The theorem packs the K assignments into slots (0,1), .., (2K-2, 2K-1) and pads the
rest of 0..L-5; the real task places 1..max_assignments assignments at random places. With
`layout="averaged"` (default) the columns pos0..pos{L-5} of the prediction are replaced by
their mean: the expectation of G1 when each of those positions is equally likely to hold a
number slot, a variable slot or a pad (G1 is linear in the population). `layout="packed"`
keeps the theorem's columns.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import sympy as sp

from empirical.compare_qk.coords import col_labels, row_labels

LAYOUTS = ("averaged", "packed")
ORDERS = ("fixed", "mixed")


def ab_from_beta(beta: float, L: int = 16) -> tuple[float, float]:
    from theory.symbols import ab_numeric

    return ab_numeric(beta, L)


def beta_from_ab(a: float, b: float) -> float:
    """The beta of W^0 with these softmax weights: a / b = e^beta."""
    return math.log(a / b)


@cache
def _entry_fn(order: str, L: int, row: tuple, col: tuple, same: bool):
    from theory.g1_closed_form import entry
    from theory.symbols import K, a, b, p

    return sp.lambdify((a, b, p, K), entry("1var", order, L, row, col, same), "math")


def g1_block(
    a: float,
    b: float,
    p: int,
    K: int,
    L: int = 16,
    order: str = "fixed",
    layout: str = "averaged",
    rows: list[str] | None = None,
    cols: list[str] | None = None,
) -> np.ndarray:
    """G1[rows, cols] of the theory at softmax weights (a, b), float64.

    rows / cols default to the comparison's labels (`coords.row_labels`, `coords.col_labels`).
    order: 'fixed' (number operand at L-3, variable at L-2: the theorem's default) or
    'mixed' (each order half the time). a, b: the attention weight per operand position and
    per other position (2a + (L-2) b = 1)."""
    from theory.g1_closed_form import entry_key, query_row_labels, validate

    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not (0 < a < 0.5 and 0 < b < 1):
        raise ValueError(f"need 0 < a < 1/2 and 0 < b < 1, got a={a}, b={b}")
    if abs(2 * a + (L - 2) * b - 1) > 1e-6:
        raise ValueError(f"the closed form needs 2a + (L-2)b = 1; got {2 * a + (L - 2) * b}")
    validate(p, K, L)
    rows = row_labels(K, L) if rows is None else rows
    cols = col_labels(p, K, L) if cols is None else cols
    queryable = set(query_row_labels(rows, L))
    G = np.zeros((len(rows), len(cols)))
    for i, rl in enumerate(rows):
        if rl not in queryable:
            continue
        for j, cl in enumerate(cols):
            G[i, j] = _entry_fn(order, L, *entry_key(rl, cl, K, L))(a, b, p, K)
    if layout == "averaged":
        region = [j for j, c in enumerate(cols) if c.startswith("pos") and int(c[3:]) < L - 4]
        if region:
            G[:, region] = G[:, region].mean(axis=1, keepdims=True)
    return G


def gamma(a: float, b: float, p: int) -> float:
    """gamma = 4ab(1 - 1/p), the overall scale of G1 (theory/statement.py)."""
    return 4 * a * b * (1 - 1 / p)
