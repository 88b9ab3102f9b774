"""Checks of Theorem C.1 per hop (the two-hop chain model, ../shared/spec/chain.md): the
derived forms of :mod:`theory.hops.last_hop` and :mod:`theory.hops.middle_hop` against the
exact numbers of the simulator (``disentangled`` with a ``ChainConfig``: autograd over the
enumerated populations, float64).

As :mod:`theory.claims`: each ``claimN`` takes a :class:`theory.claims.Point` (here with
hops = 2) and returns a :class:`theory.claims.Check` (claim HN of the report's section);
nothing is tuned, a failing comparison is reported as failing.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from disentangled.basis import Basis
from disentangled.experiments import one_step_each
from disentangled.gradient import first_order_gradients, loss_and_gradients, w2_drive
from disentangled.model import initial_weights
from theory.claims import Check, Point, compare, ebar_block
from theory.g1_closed_form import g1_matrix
from theory.hops.last_hop import TERMS, exact_g3, g3_polynomial, reduction_to_c1
from theory.hops.middle_hop import (
    drive_at_share,
    drive_blocks,
    drive_formula,
    w2_independence_lemma,
)
from theory.symbols import ab_numeric


def sim_g3(pt: Point, kind: str | None = None) -> np.ndarray:
    return exact_g3(pt.sim_config(), kind)


def point_labels(pt: Point) -> list[str]:
    return Basis(pt.p, pt.K, pt.L).labels


# --------------------------------------------------------------------------------------------
# 1. G1^(3): exact polynomial form = exact gradient


def claim1(pt: Point) -> Check:
    """G1^(3) at (W^0, W^0) from :func:`theory.hops.last_hop.g3_polynomial` (five terms, exact
    polynomials in a, b) against autograd, on 1-hop, 2-hop and the mixture."""
    cfg = pt.sim_config()
    names = point_labels(pt)
    vals, ok = {}, True
    for kind in ("1var-1hop", "1var-2hop", None):
        poly = g3_polynomial(cfg, kind)
        cmp = compare(poly.at_beta(pt.beta, pt.L), sim_g3(pt, kind), names)
        name = kind or f"mix s={pt.share:g}"
        vals[f"{name}: max abs diff"] = cmp.max_abs_diff
        vals[f"{name}: max rel diff"] = cmp.max_rel_diff
        ok &= cmp.ok and poly.degree_check
    vals["degree <= 5 in a and in b (37th point exact)"] = bool(ok)
    return Check(1, "G1^(3) exact form = exact gradient", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# 2. Reduction to Theorem C.1 when every hop count is 1


def claim2(pt: Point, c1_kinds: tuple[str, ...] = ("0var", "1var", "2var")) -> Check:
    """pointers = 0: the chain's G1^(3) on 1-var data equals the map of C.1's symbolic G1
    (:func:`theory.hops.last_hop.reduction_to_c1`), and its "query" term is C.1's G1 itself on
    the 0var, 1var and 2var populations."""
    cfg = pt.sim_config(pointers=0, hop1_share=1.0)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    labels, C = g1_matrix(pt.p, pt.K, pt.beta, pt.L, "1var")
    exact = exact_g3(cfg, "1var-1hop")
    red = compare(reduction_to_c1(C, labels, pt.K, pt.L, a_v, b_v), exact, labels)
    vals = {"1var: max abs diff (reduction vs exact)": red.max_abs_diff}
    vals["1var: max|G1^(3) - G1_C1| / max|G1^(3)|"] = float(
        np.abs(exact - C).max() / np.abs(exact).max()
    )
    ok = red.ok
    chain_kinds = {"0var": "0var", "1var": "1var-1hop", "2var": "2var-1hop"}
    for c1_kind in c1_kinds:
        chain_kind = chain_kinds[c1_kind]
        _, Ck = g1_matrix(pt.p, pt.K, pt.beta, pt.L, c1_kind)
        q = g3_polynomial(cfg, chain_kind).term("query", a_v, b_v)
        cmp = compare(q, Ck, labels)
        vals[f"{c1_kind}: query term vs C.1 G1, max abs diff"] = cmp.max_abs_diff
        ok &= cmp.ok
    return Check(2, "reduces to Theorem C.1 (pointers = 0)", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# 3. The memory term: its dilution on 2-hop data


def memory_terms(pt: Point, kind: str) -> dict[str, tuple[float, float, float]]:
    """Per term of G1^(3) on ``kind``: (c_diag, c_off, deviation) of the bar_v block."""
    poly = g3_polynomial(pt.sim_config(), kind)
    a_v, b_v = ab_numeric(pt.beta, pt.L)
    names = point_labels(pt)
    out = {t: ebar_block(poly.term(t, a_v, b_v), names, pt.K)[1:] for t in TERMS}
    out["total"] = ebar_block(poly.total(a_v, b_v), names, pt.K)[1:]
    return out


def claim3(pt: Point) -> Check:
    """The bar_v x bar_v block of G1^(3) is c_d I + c_o (J - I) on 1-hop and on 2-hop data
    (exact), with contrast c_d - c_o > 0 on 1-hop data.  Reported: the contrast on 2-hop
    data and each term's share of it."""
    vals, ok = {}, True
    for kind in ("1var-1hop", "1var-2hop"):
        terms = memory_terms(pt, kind)
        cd, co, dev = terms["total"]
        scale = float(np.abs(sim_g3(pt, kind)).max())
        ok &= dev <= 1e-10 * scale
        vals[f"{kind}: c_diag"] = cd
        vals[f"{kind}: c_off"] = co
        vals[f"{kind}: contrast c_diag - c_off"] = cd - co
        for t, (tcd, tco, _) in terms.items():
            if t != "total":
                vals[f"{kind}: contrast of {t}"] = tcd - tco
    ok &= vals["1var-1hop: contrast c_diag - c_off"] > 0
    return Check(3, "memory block; dilution on 2-hop data", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# 4. The middle hop at the start: exactly zero


def claim4(pt: Point, xis: tuple[float, ...] = (1.0, 10.0)) -> Check:
    """grad_W2 L at (W^0, W^0) is exactly 0.0 in float64: first order and at finite xi, on
    the mixture; the sympy lemma holds; after one W3 step the gradient is nonzero."""
    cfg = pt.sim_config()
    W2, W3 = initial_weights(cfg)
    G2, G3 = first_order_gradients(cfg)
    vals = {"max|G1^(2)| at W^0": float(G2.abs().max())}
    zero = float(G2.abs().max()) == 0.0
    for x in xis:
        _, (g2, _) = loss_and_gradients((W2, W3), cfg, x)
        vals[f"max|grad_W2 L| at xi={x:g}"] = float(g2.abs().max())
        zero &= float(g2.abs().max()) == 0.0
    lemma = w2_independence_lemma()
    eta3 = 1.0 / float(G3.abs().max())
    G2_after, _ = first_order_gradients(cfg, None, (W2, W3 + eta3 * G3))
    vals["sympy lemma (h independent of W2)"] = lemma
    vals["max|G1^(2)| after a W3 step (eta3 max|G3| = 1)"] = float(G2_after.abs().max())
    ok = zero and lemma and float(G2_after.abs().max()) > 0
    return Check(4, "W2 gradient exactly zero at W3 = W^0", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# 5. The drive of the middle hop


def claim5(pt: Point, eta_scale: float = 1e-2) -> Check:
    """D (the eta3-coefficient of G1^(2) after W3 = W^0 + eta3 G1^(3)): derived formula =
    forward-mode derivative of the exact gradient; G1^(2)(eta3)/eta3 - D = O(eta3) (halves
    with eta3); the share polynomial D(s) matches the exact drive at the point's share."""
    cfg = pt.sim_config()
    names = point_labels(pt)
    G3 = sim_g3(pt)
    exact = w2_drive(cfg, torch.tensor(G3)).numpy()
    formula = sum(w * drive_formula(cfg, G3, k) for k, w in cfg.training_mix().items())
    cmp = compare(formula, exact, names)
    blocks = drive_blocks(cfg)
    share = compare(drive_at_share(blocks, pt.share), exact, names)
    W2, W3 = initial_weights(cfg)
    eta = eta_scale / float(np.abs(G3).max())
    rem = []
    for e in (eta, eta / 2):
        G2e, _ = first_order_gradients(cfg, None, (W2, W3 + e * torch.tensor(G3)))
        rem.append(float(np.abs(G2e.numpy() / e - exact).max()))
    ratio = rem[0] / rem[1] if rem[1] > 0 else math.inf
    ix = {lab: i for i, lab in enumerate(names)}
    bars = [ix[f"bar_v{u}"] for u in range(pt.K)]
    toks = [ix[f"v{u}"] for u in range(pt.K)]
    own_token = float(np.mean([exact[r, c] for r, c in zip(bars, toks, strict=True)]))
    pointer_memory = float(np.mean([exact[r, r] for r in bars]))
    i, j = np.unravel_index(int(np.argmax(np.abs(exact))), exact.shape)
    vals = {
        "max|D|": float(np.abs(exact).max()),
        "formula vs exact: max abs diff": cmp.max_abs_diff,
        "share polynomial vs exact: max abs diff": share.max_abs_diff,
        "|G1^(2)/eta3 - D| at eta3, eta3/2": tuple(rem),
        "ratio (2 = first-order remainder)": ratio,
        "largest |D| entry": f"({names[i]}, {names[j]}): {exact[i, j]:.4g}",
        "mean D[bar_v r, v r] (own token)": own_token,
        "mean D[bar_v r, bar_v r] (pointer memory)": pointer_memory,
    }
    for s in (0.0, 0.5, 1.0):
        Ds = drive_at_share(blocks, s)
        vals[f"D(s={s:g}): mean D[bar_v r, bar_v r]"] = float(np.mean([Ds[r, r] for r in bars]))
        vals[f"D(s={s:g}): max|D|"] = float(np.abs(Ds).max())
    ok = cmp.ok and share.ok and 1.8 <= ratio <= 2.2
    return Check(5, "drive of the middle hop after one W3 step", pt.label(), bool(ok), vals)


# --------------------------------------------------------------------------------------------
# 6. One step each


def claim6(pt: Point, scales3=None, scales2=None) -> Check:
    """One W3 step then one W2 step over a grid of sizes: whether any pair solves every
    2-hop sequence (1var-2hop and 2var-2hop).  Passes when the search ran; the verdict is
    a value, not the pass/fail."""
    res = one_step_each(pt.sim_config(), scales3, scales2)
    best = res["best"]
    vals = {
        "W0 accuracy": res["before"],
        "pairs solving every 2-hop sequence": len(res["solving"]),
        "smallest solving (eta3, eta2)": (
            (res["smallest"]["eta3"], res["smallest"]["eta2"]) if res["smallest"] else "none"
        ),
        "best pair (eta3 max|G3|, eta2 max|G2|)": (best["scale3"], best["scale2"]),
        "accuracy at the best pair": best["accuracy"],
    }
    row = next(r for r in res["rows"] if r["scale3"] == best["scale3"])
    vals["accuracy after the W3 step alone (same eta3)"] = row["after_w3"]
    gain, loss = 0.0, {}
    for r in res["rows"]:
        for cell in r["after_both"]:
            hop2 = [k for k in ("1var-2hop", "2var-2hop") if k in cell["accuracy"]]
            d = np.mean([cell["accuracy"][k] - r["after_w3"][k] for k in hop2]) if hop2 else 0.0
            gain = max(gain, float(d))
            for k, v in cell["accuracy"].items():
                loss[k] = max(loss.get(k, 0.0), r["after_w3"][k] - v)
    hop2_kinds = [k for k in ("1var-2hop", "2var-2hop") if k in res["before"]]
    vals["W3 step alone solves every 2-hop sequence at some eta3"] = any(
        all(r["after_w3"][k] >= 1 - 1e-12 for k in hop2_kinds) for r in res["rows"]
    )
    vals["largest gain of mean 2-hop accuracy from the W2 step"] = gain
    vals["largest accuracy loss caused by the W2 step, per kind"] = loss
    return Check(6, "one step each (2-hop solved?)", pt.label(), True, vals)


ALL_CLAIMS = (claim1, claim2, claim3, claim4, claim5, claim6)
