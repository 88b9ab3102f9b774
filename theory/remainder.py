"""A bound on the second-order remainder R(xi) = -grad L(W^0) - xi G1.

With s = softmax(xi F) the exact gradient is -grad L = xi E[ sum_y ([y = y*] - s_y) dF_y/dW ],
so R(xi) = xi E[ sum_y (1/p - s_y) dF_y/dW ].  Three elementary facts bound it:

1. h_m >= 0 and sum_m h_m = S, the attention mass on number-carrying positions (at W^0 a
   constant: S = a + K b for 1-var), so 0 <= F_y = sum_{m + m' = y} h_m h_m' <= S^2 =: M.
2. F_y in [0, M] gives e^{-xi M}/p <= s_y <= e^{xi M}/p, hence sum_y |s_y - 1/p| <= e^{xi M} - 1.
3. dF_y/dW_ij = (x_T)_i sum_t sigma_t (gamma_t - gammabar) (x_t)_j with gamma_t = 2 h_{y - m_t}
   in [0, 2S]; coordinates of the inputs are at most q (q = 1, or 2 for a 2-var query with
   v1 = v2), so |dF_y/dW_ij| <= 2 S q^2.

Therefore  max_ij |R_ij(xi)| <= 2 q^2 S xi (e^{xi S^2} - 1) <= 2 q^2 S^3 xi^2 e^{xi S^2},
which is O(xi^2) with an explicit constant.  S and q are read off the population's sites.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from theory.population import populations
from theory.symbols import xi


@cache
def number_mass(kind: str = "1var", L: int = 16) -> sp.Expr:
    """S = sum of sigma over number-carrying sites (family sites count K times)."""
    from theory.symbols import K

    masses = set()
    for _, pop in populations(kind, "fixed", L):
        S = sp.Add(*[s.sigma * (K if s.family else s.mult) for s in pop.sites if s.number])
        masses.add(S)
    (S,) = masses
    return S


def max_coordinate(kind: str) -> int:
    """Largest coordinate of any input vector: 2 for a 2-var query with v1 = v2, else 1."""
    return 2 if kind == "2var" else 1


@cache
def remainder_bound(kind: str = "1var", L: int = 16) -> sp.Expr:
    """2 q^2 S xi (e^{xi S^2} - 1): a rigorous bound on max |R(xi)| (module docstring)."""
    S, q = number_mass(kind, L), max_coordinate(kind)
    return 2 * q**2 * S * xi * (sp.exp(xi * S**2) - 1)


@cache
def remainder_constant(kind: str = "1var", L: int = 16) -> sp.Expr:
    """C in max|R| <= C xi^2 + O(xi^3): the xi^2 coefficient of the bound, 2 q^2 S^3."""
    return sp.factor(sp.series(remainder_bound(kind, L), xi, 0, 3).removeO().coeff(xi, 2))
