"""The middle hop's gradient: zero at W3 = W^0, and its leading term after one step of W3.

At W3 = W^0 (:func:`w2_independence_lemma`) the loss does not depend on W2, so
G1^(2) = 0 and every higher-order term vanishes too.  After one step W3 = W^0 + eta3 G (G =
G1^(3)), layer 3's scores read the ebar coordinates of x'_T, which W2 moves.  Chain rule:
with c = -dl/dx'_T the first-order loss's gradient in the updated query,

    c = W3 r' - b gbar W3^T x'_T      (keys x_t, and the query's own key x'_T),
    G1^(2) = E[ x_T q^T ],   q = sum_s sigma2_s (k_s - kbar) x_s,   k_s = <ebar_{w(s)}, c>

(k_s = 0 unless x_s holds a variable token w(s); kbar = sum_s sigma2_s k_s).  W^0's part of
c lies in span(e_=, pi_{L-3}, pi_{L-2}), orthogonal to every ebar, so only eta3 G survives:

    G1^(2)(eta3) = eta3 D + O(eta3^2),   D = E[x_T q^T] with c = G r' - b gbar G^T x'_T,

all quantities at (W^0, W^0) (a on the operands, b elsewhere, in both layers).  D is
bilinear in (data, G): with hop1 share s, data = s D1 + (1 - s) D2 and G = s G_1 + (1 - s) G_2,

    D(s) = s^2 D[1,1] + s (1 - s) (D[1,2] + D[2,1]) + (1 - s)^2 D[2,2],

D[i, j] the drive on data i with G from data j (a quadratic in s, exactly).
"""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from disentangled.basis import Basis
from disentangled.config import ChainConfig
from disentangled.population import whole_population
from theory.hops.last_hop import exact_g3, first_order
from theory.symbols import ab_numeric

s_share = sp.Symbol("s", nonnegative=True)


def drive_formula(cfg: ChainConfig, G: np.ndarray, kind: str) -> np.ndarray:
    """D = E[x_T q^T] on one kind's population for a given G (the derived formula, float64;
    no autograd)."""
    basis = Basis(cfg.p, cfg.K, cfg.L)
    a_v, b_v = ab_numeric(cfg.beta, cfg.L)
    chunk = whole_population(cfg, kind)
    fo = first_order(cfg, chunk, a_v, b_v, torch.float64)
    p, K = cfg.p, cfg.K
    Gt = torch.as_tensor(G, dtype=torch.float64)
    x_new = fo.x_T + sum(fo.delta.values())
    gbar = fo.pgbar / p
    r = (fo.r_sites - b_v * fo.pgbar[:, None] * x_new) / p  # r' (key x'_T at t = T)
    c = r @ Gt.T - b_v * gbar[:, None] * (x_new @ Gt)
    c_bar = torch.nn.functional.pad(c[:, basis.bar_v(0) : basis.bar_v(0) + K], (0, 1))
    var = chunk.tok - basis.v(0)
    var = torch.where((var >= 0) & (var < K), var, K)
    k = c_bar.gather(1, var)  # (N, L): <ebar_w, c> at variable tokens, 0 elsewhere
    sig = fo.sigma.expand_as(k)
    kbar = (sig * k).sum(1, keepdim=True)
    coef = sig * (k - kbar)
    N = len(chunk)
    q = torch.zeros((N, basis.dim + 1), dtype=torch.float64)
    q.scatter_add_(1, chunk.tok, coef)
    q[:, basis.pos(0) : basis.pos(0) + cfg.L] += coef
    q.scatter_add_(1, chunk.bars[..., 0], coef)
    q.scatter_add_(1, chunk.bars[..., 1], coef)
    q = q[:, : basis.dim]
    D = (fo.x_T * chunk.weights[:, None]).T @ q
    return D.numpy()


def drive_blocks(cfg: ChainConfig, one: str = "1var-1hop", two: str = "1var-2hop") -> dict:
    """{(i, j): D on data i with G = G1^(3) on data j} for i, j in {one, two}."""
    kinds = {1: one, 2: two}
    return {
        (i, j): drive_formula(cfg, exact_g3(cfg, kinds[j]), kinds[i])
        for i in (1, 2)
        for j in (1, 2)
    }


def drive_share_polynomial(blocks: dict) -> dict[int, np.ndarray]:
    """Coefficients of s^0, s^1, s^2 of D(s), derived by sympy from the bilinear form."""
    w = {1: s_share, 2: 1 - s_share}
    poly = sp.expand(sum(w[i] * w[j] * sp.Symbol(f"D{i}{j}") for i in (1, 2) for j in (1, 2)))
    out = {}
    for k in range(3):
        coeff = poly.coeff(s_share, k)
        out[k] = sum(
            float(coeff.coeff(sp.Symbol(f"D{i}{j}"))) * blocks[(i, j)]
            for i in (1, 2)
            for j in (1, 2)
        )
    return out


def drive_at_share(blocks: dict, share: float) -> np.ndarray:
    poly = drive_share_polynomial(blocks)
    return sum(poly[k] * share**k for k in range(3))


def w2_independence_lemma(n_pos: int = 2, zero_bar: bool = True) -> bool:
    """A symbolic chain model on coordinates (n0, n1, v, =, pos, bar): generic inputs,
    generic W2 (every entry a symbol), W_OV2 e_v = e_bar, and W3 generic except for zero
    row and column `bar`.  Returns True iff every number coordinate h_m of layer 3's output
    has zero derivative in every entry of W2 (after simplification).  ``zero_bar=False``
    gives W3 a symbolic `bar` row and column (the control: then h depends on W2).

    Why: if W3 has zero rows and columns at the coordinates that W_OV2 writes (ebar), layer
    3's scores x'_T^T W3 x'_t only see x'_T through rows outside ebar, and the keys only
    through columns outside ebar, while x'_T - x_T lies in ebar; h_m = sum_t sigma_t
    <e_m, x'_t> and <e_m, x'_T - x_T> = 0.  So the loss, at every xi, is constant in W2 and
    its gradient in W2 is exactly zero; W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T is such a W3."""
    names = ("n0", "n1", "v", "=", "pos", "bar")
    dim = len(names)
    bar = names.index("bar")
    W2 = sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"A{i}{j}"))
    W3 = sp.Matrix(
        dim, dim, lambda i, j: 0 if zero_bar and bar in (i, j) else sp.Symbol(f"B{i}{j}")
    )
    ov2 = sp.zeros(dim, dim)
    ov2[bar, names.index("v")] = 1
    xs = [sp.Matrix(sp.symbols(f"x{t}_0:{dim}")) for t in range(n_pos)]
    x_T = sp.Matrix(sp.symbols(f"q0:{dim}"))
    keys2 = [*xs, x_T]
    s2 = [sp.exp((x_T.T * W2 * k)[0]) for k in keys2]
    Z2 = sp.Add(*s2)
    x_new = x_T + sum(
        (s / Z2 * (ov2 * k) for s, k in zip(s2, keys2, strict=True)), sp.zeros(dim, 1)
    )
    keys3 = [*xs, x_new]
    s3 = [sp.exp((x_new.T * W3 * k)[0]) for k in keys3]
    Z3 = sp.Add(*s3)
    h = [sp.Add(*[s / Z3 * k[m] for s, k in zip(s3, keys3, strict=True)]) for m in (0, 1)]
    # a rational point for everything but W2: where h moves with W2, False (fast path)
    others = sorted(set().union(*(hm.free_symbols for hm in h)) - set(W2), key=str)
    point = {s: sp.Rational(((7 * i) % 11) - 5, 3 + i % 4) for i, s in enumerate(others)}
    at_w2 = {w: sp.Rational(((5 * i) % 7) - 3, 2 + i % 3) for i, w in enumerate(W2)}
    for hm in h:
        reduced = hm.xreplace(point)
        if any(abs(float(sp.diff(reduced, w).xreplace(at_w2))) > 1e-12 for w in W2):
            return False
    derivatives = [sp.diff(hm, w) for hm in h for w in W2]
    return all(sp.simplify(d) == 0 for d in derivatives)
