"""Shared sympy symbols and the softmax weights at the initialisation W^0.

At W^0 = beta e_= (pi_13 + pi_14)^T the query scores are beta at the two operand positions
and 0 at the other L - 2 positions (the query attends to itself too), so

    Z = 2 e^beta + (L - 2),   a = e^beta / Z  (operand positions),   b = 1 / Z  (elsewhere),

and 2a + (L - 2) b = 1.  Z does not depend on the sequence (the paper's footnote):
:func:`normaliser` derives it from the scores rather than typing it in.
"""

from __future__ import annotations

import math

import sympy as sp

a, b = sp.symbols("a b", positive=True)
p, K = sp.symbols("p K", positive=True, integer=True)
beta, xi, eta = sp.symbols("beta xi eta", positive=True)

DEFAULT_L = 16


def normaliser(L: int = DEFAULT_L) -> sp.Expr:
    """Z = sum_t exp(x_T^T W^0 x_t) over t = 0..L-1, derived from the scores of W^0.

    Only x_T's `=` coordinate (1 for every sequence) and x_t's pi_{L-3}, pi_{L-2} coordinates
    (1 exactly at t = L-3, L-2, whatever token sits there) enter the score, so the sum is a
    sum over positions only: no sequence-dependent quantity survives.
    """
    scores = [beta * (1 if t in (L - 3, L - 2) else 0) for t in range(L)]
    return sp.Add(*[sp.exp(s) for s in scores])


def attention_weights(L: int = DEFAULT_L) -> tuple[sp.Expr, sp.Expr]:
    """(a, b) as functions of beta: the softmax weight at an operand position and elsewhere."""
    Z = normaliser(L)
    return sp.exp(beta) / Z, 1 / Z


def ab_numeric(beta_value: float, L: int = DEFAULT_L) -> tuple[float, float]:
    """Float64 (a, b) for a given beta (same formula as :func:`attention_weights`)."""
    if beta_value >= 0:  # divide through by e^beta: no overflow for large beta
        e = math.exp(-beta_value)
        Z = 2.0 + (L - 2) * e
        return 1.0 / Z, e / Z
    Z = 2.0 * math.exp(beta_value) + (L - 2)
    return math.exp(beta_value) / Z, 1.0 / Z
