"""Two lemmas of the chain model, checked by sympy on small symbolic instances.

* :func:`self_key_chain_rule_lemma`: when the query also attends to itself (key x'_T = the
  query), d sigma_t / dW = sigma_t q (k_t - sum_s sigma_s k_s)^T still holds with k_T = q:
  the query's own key enters r' exactly like any other key (the "self_key" term of
  :mod:`theory.chain_g1`).
* :func:`w2_independence_lemma`: if W3 has zero rows and columns at the coordinates that
  W_OV2 writes (ebar), the numbers h read by F do not depend on W2 at all: layer 3's scores
  x'_T^T W3 x'_t only see x'_T through rows outside ebar, and the keys only through
  columns outside ebar, while x'_T - x_T lies in ebar; h_m = sum_t sigma_t <e_m, x'_t> and
  <e_m, x'_T - x_T> = 0.  So the loss, at every xi, is constant in W2 and its gradient in W2
  is exactly zero; W^0 = beta e_= (pi_{L-3} + pi_{L-2})^T is such a W3.
"""

from __future__ import annotations

import sympy as sp


def self_key_chain_rule_lemma(n_pos: int = 2, dim: int = 2) -> bool:
    """sigma = softmax over keys (x_0 .. x_{n-1}, q) of q^T W key: the derivative of
    sigma_t in W equals sigma_t q (k_t - kbar)^T, the last key being q itself."""
    W = sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"W{i}{j}"))
    q = sp.Matrix(sp.symbols(f"q0:{dim}"))
    keys = [sp.Matrix(sp.symbols(f"x{t}_0:{dim}")) for t in range(n_pos)] + [q]
    scores = [(q.T * W * k)[0] for k in keys]
    E = {sp.exp(s): sp.Symbol(f"E{t}", positive=True) for t, s in enumerate(scores)}
    Z = sp.Add(*[sp.exp(s) for s in scores])
    sig = [sp.exp(s) / Z for s in scores]
    kbar = sum((sg * k for sg, k in zip(sig, keys, strict=True)), sp.zeros(dim, 1))
    for t, k in enumerate(keys):
        want = sig[t] * q * (k - kbar).T
        for i in range(dim):
            for j in range(dim):
                if sp.cancel((sp.diff(sig[t], W[i, j]) - want[i, j]).subs(E)) != 0:
                    return False
    return True


def w2_independence_lemma(n_pos: int = 2, zero_bar: bool = True) -> bool:
    """A symbolic chain model on coordinates (n0, n1, v, =, pos, bar): generic inputs,
    generic W2 (every entry a symbol), W_OV2 e_v = e_bar, and W3 generic except for zero
    row and column `bar`.  Returns True iff every number coordinate h_m of layer 3's output
    has zero derivative in every entry of W2 (after simplification).  ``zero_bar=False``
    gives W3 a symbolic `bar` row and column (the control: then h depends on W2)."""
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
