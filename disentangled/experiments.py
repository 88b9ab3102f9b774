"""Experiments on the disentangled model: one gradient step (Theorem C.1, check 6), one step
of each matrix of the two-hop chain (question 4 of chain.md), multi-step gradient descent (any
number of hops), and the random-embedding variant.

One step: W^1 = W^0 + eta G1 with G1 the exact leading term of -grad L(W^0) on 1-var data
(``gradient.g1``).  Predictions are argmax_y F_y(h) (independent of xi > 0); a sequence is
correct only if its label is the unique argmax (``metrics``).  A step "solves 2-var" when
the exact 2-var population accuracy is 1 (to 1e-12).  Every number is an exact population
value.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .basis import Basis
from .config import KINDS, ChainConfig, SimConfig
from .embedding import RandomGeometry, ReadoutOnly
from .fast import ORTHOGONAL, Geometry
from .gradient import (
    Mix,
    cross_entropy_terms,
    expectation_and_grad,
    first_order_gradients,
    g1,
    loss_and_gradients,
    training_mixture,
)
from .metrics import hop_stats, population_stats
from .model import initial_W, initial_weights
from .population import available_kinds, population_size

SOLVED = 1.0 - 1e-12
HOP2_KINDS = ("1var-2hop", "2var-2hop")
TRAINABLE = ("both", "w2", "w3")


def accuracies(W: torch.Tensor, cfg: SimConfig, geometry: Geometry = ORTHOGONAL):
    return {k: population_stats(W, cfg, k, geometry).accuracy for k in KINDS}


def default_etas(G1: torch.Tensor, n: int = 26) -> list[float]:
    """Geometric grid with eta * max|G1| (largest score change) from 1e-2 to 1e3."""
    scale = float(G1.abs().max())
    return [float(s / scale) for s in np.geomspace(1e-2, 1e3, n)]


def _solves(W0, G1, eta, cfg, kind="2var") -> bool:
    return population_stats(W0 + eta * G1, cfg, kind).accuracy >= SOLVED


def log_bisect(solves, lo: float, hi: float, rel_tol: float = 1e-3) -> float:
    """The edge between lo and hi (0 < lo < hi, solves(lo) != solves(hi)) of a predicate of a
    step size, bisected in log step size to a relative width rel_tol; returns the solving end
    of the final bracket."""
    s_lo = solves(lo)
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        if solves(mid) == s_lo:
            lo = mid
        else:
            hi = mid
    return lo if s_lo else hi


def _bisect(W0, G1, cfg, kind, lo: float, hi: float, rel_tol: float = 1e-3) -> float:
    """Edge between lo and hi of "eta G1 solves `kind`" (log_bisect)."""
    return log_bisect(lambda eta: _solves(W0, G1, eta, cfg, kind), lo, hi, rel_tol)


def _intervals(W0, G1, cfg, kind, etas, solved, refine) -> list[list[float | None]]:
    """Maximal runs of solving grid etas as [low, high]; edges bisected when ``refine``;
    high is None when the run reaches the end of the grid."""
    out = []
    i = 0
    while i < len(etas):
        if not solved[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(etas) and solved[j + 1]:
            j += 1
        lo = etas[i]
        if i > 0 and refine:
            lo = _bisect(W0, G1, cfg, kind, etas[i - 1], etas[i])
        hi = None
        if j + 1 < len(etas):
            hi = _bisect(W0, G1, cfg, kind, etas[j], etas[j + 1]) if refine else etas[j]
        out.append([lo, hi])
        i = j + 1
    return out


@dataclass
class OneStepResult:
    """``rows[i]`` holds eta, eta*max|G1| and the 0/1/2-var accuracy after the step;
    ``solving_intervals`` the maximal runs of grid etas with 2-var accuracy 1, each
    [low, high] with edges refined by bisection (high None: still solving at the grid's end);
    ``intervals_by_kind`` the same for every kind (0-var, 1-var, 2-var)."""

    config: dict
    max_abs_g1: float
    before: dict
    rows: list[dict] = field(default_factory=list)
    solving_intervals: list[list[float | None]] = field(default_factory=list)
    intervals_by_kind: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    def _fmt(self, intervals) -> str:
        if not intervals:
            return "none in the grid"
        parts = []
        for lo, hi in intervals:
            top = f"{hi:.6g}" if hi is not None else f">= {self.rows[-1]['eta']:.6g} (grid end)"
            parts.append(f"[{lo:.6g}, {top}]")
        return ", ".join(parts)

    def summary(self) -> str:
        lines = [f"eta solving every 2-var sequence: {self._fmt(self.solving_intervals)}"]
        for k in ("0var", "1var"):
            lines.append(f"eta with 100% {k} accuracy: {self._fmt(self.intervals_by_kind[k])}")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        c = self.config
        lines = [
            f"One gradient step W1 = W0 + eta*G1 (1-var G1), p={c['p']}, K={c['K']}, "
            f"beta={c['beta']}, L={c['L']}, operand order {c['operand_order']}; "
            f"max|G1| = {self.max_abs_g1:.6g}",
            "",
            "| eta | eta*max|G1| | 0-var acc | 1-var acc | 2-var acc |",
            "| --- | --- | --- | --- | --- |",
            "| W0 (before) | 0 | " + " | ".join(f"{self.before[k]:.4f}" for k in KINDS) + " |",
        ]
        for r in self.rows:
            lines.append(
                f"| {r['eta']:.4g} | {r['step_scale']:.4g} | "
                + " | ".join(f"{r[k]:.4f}" for k in KINDS)
                + " |"
            )
        lines += ["", self.summary()]
        return "\n".join(lines)


def one_step(cfg: SimConfig, etas: list[float] | None = None, refine: bool = True):
    """Accuracy before/after W1 = W0 + eta G1 on every eta of the grid (see module doc)."""
    W0, G1 = initial_W(cfg), g1(cfg, "1var")
    etas = sorted(etas) if etas else default_etas(G1)
    if any(not math.isfinite(e) or e <= 0 for e in etas):
        raise ValueError(f"etas={etas}: every eta must be finite and > 0")
    scale = float(G1.abs().max())
    res = OneStepResult(asdict(cfg), scale, accuracies(W0, cfg))
    for eta in etas:
        res.rows.append({"eta": eta, "step_scale": eta * scale, **accuracies(W0 + eta * G1, cfg)})
    for k in KINDS:
        solved = [r[k] >= SOLVED for r in res.rows]
        res.intervals_by_kind[k] = _intervals(W0, G1, cfg, k, etas, solved, refine)
    res.solving_intervals = res.intervals_by_kind["2var"]
    return res


# ----------------------------------------------------------------------------------------
def ebar_block(W: torch.Tensor, cfg: SimConfig) -> torch.Tensor:
    """Rows bar_v (query component) x columns bar_v (key component)."""
    b = Basis.from_config(cfg)
    return b.block(W, b.labels_of("bar_v"), b.labels_of("bar_v"))


def _snapshot(step: int, W: torch.Tensor, cfg: SimConfig, loss: float) -> dict:
    stats = {k: population_stats(W, cfg, k) for k in KINDS}
    blk = ebar_block(W, cfg)
    K = cfg.K
    off = (blk.sum() - blk.diagonal().sum()) / (K * (K - 1))
    return {
        "step": step,
        "loss": loss,
        "accuracy": {k: stats[k].accuracy for k in KINDS},
        "bound_mass": {k: stats[k].bound_mass for k in ("1var", "2var")},
        "operand_number_mass": {k: stats[k].operand_number_mass for k in ("0var", "1var")},
        "ebar_block": blk.tolist(),
        "ebar_diag_mean": float(blk.diagonal().mean()),
        "ebar_offdiag_mean": float(off),
    }


def _hop_snapshot(step: int, weights: tuple, cfg: ChainConfig, loss: float) -> dict:
    stats = hop_stats(weights, cfg)
    W2, W3 = weights
    return {
        "step": step,
        "loss": loss,
        "accuracy": {k: v["accuracy"] for k, v in stats.items()},
        "bound_mass": {k: v["bound_mass"] for k, v in stats.items() if k != "0var"},
        "pointer_mass": {k: v["pointer_mass"] for k, v in stats.items() if "2hop" in k},
        "w2_ebar_diag": float(ebar_block(W2, cfg).diagonal().mean()),
        "w3_ebar_diag": float(ebar_block(W3, cfg).diagonal().mean()),
    }


def dynamics(
    cfg: SimConfig | ChainConfig,
    steps: int = 300,
    lr: float = 0.2,
    xi: float = 10.0,
    mix: Mix = None,
    W: torch.Tensor | None = None,
    train: str = "both",
) -> dict:
    """Full-batch gradient descent W <- W - lr grad L(W) on the exact population of ``mix``
    (default: the config's training mix, 1-var data for C.1) from W^0 (C.1: or from ``W``).

    Returns {"config", "xi", "lr", "mix", "history": [snapshot per step 0..steps]}.  One hop:
    each snapshot has the training loss, the 0/1/2-var accuracies, the attention mass on the
    bound assignment numbers (1-var, 2-var), on operand numbers (0-var, 1-var), and the
    bar_v x bar_v block of W.  Two hops: ``train`` says which matrices move ("both", "w2",
    "w3", recorded as "train"); each snapshot has the loss, per-kind accuracy, the last
    layer's bound mass, the middle layer's pointer mass, and the mean diagonal of the bar_v x
    bar_v blocks of W2 and W3."""
    if train not in TRAINABLE:
        raise ValueError(f"train={train!r}: must be one of {', '.join(TRAINABLE)}")
    if steps < 0:
        raise ValueError(f"steps={steps}: must be >= 0")
    mix_n = dict(training_mixture(cfg, mix))

    def ce(F, y):
        return cross_entropy_terms(F, y, xi)

    def loss_grads(ws: tuple, need_grad: bool) -> tuple[float, tuple]:
        if cfg.hops > 1:
            return loss_and_gradients(ws, cfg, xi, mix)
        value, grad = expectation_and_grad(ws[0], cfg, mix_n, ce, need_grad=need_grad)
        return float(value), (grad,)

    head = {"config": asdict(cfg), "xi": xi, "lr": lr}
    if cfg.hops == 1:
        weights, moving = (initial_W(cfg) if W is None else W.clone(),), (True,)
    else:
        weights, moving = initial_weights(cfg), (train != "w3", train != "w2")
        head["train"] = train
    history = []
    for step in range(steps + 1):
        value, grads = loss_grads(weights, step < steps)
        if cfg.hops == 1:
            history.append(_snapshot(step, weights[0], cfg, value))
        else:
            history.append(_hop_snapshot(step, weights, cfg, value))
        if step < steps:
            weights = tuple(
                W - lr * g if m else W for W, g, m in zip(weights, grads, moving, strict=True)
            )
    return {**head, "mix": mix_n, "history": history}


# ----------------------------------------------------------------------------------------
def _hop_accuracies(weights: tuple, cfg: ChainConfig) -> dict[str, float]:
    return {k: v["accuracy"] for k, v in hop_stats(weights, cfg).items()}


def one_step_each(
    cfg: ChainConfig,
    scales3: list[float] | None = None,
    scales2: list[float] | None = None,
    mix3: Mix = None,
    mix2: Mix = None,
) -> dict:
    """W3 = W^0 + eta3 G1^(3)(W^0, W^0), then W2 = W^0 + eta2 G1^(2)(W^0, W3).

    Step sizes are given as scales eta * max|G| (the largest score change of the step):
    ``scales3`` for W3 (default 13 log-spaced from 0.03 to 30), ``scales2`` for W2 (default
    13 from 0.1 to 1000).  G1^(3) is taken on ``mix3``, G1^(2) on ``mix2`` (both default to
    the config's training mix).  Returns the accuracies before, after the W3 step, and after
    both steps for every grid pair; ``solving`` lists the pairs with 100% accuracy on every
    2-hop kind, ``smallest`` the one with the smallest eta3 (then eta2), or None."""
    scales3 = list(scales3 or np.geomspace(0.03, 30.0, 13))
    scales2 = list(scales2 or np.geomspace(0.1, 1000.0, 13))
    for s in scales3 + scales2:
        if not math.isfinite(s) or s <= 0:
            raise ValueError(f"step scale {s}: must be finite and > 0")
    W2_0, W3_0 = initial_weights(cfg)
    _, G3 = first_order_gradients(cfg, mix3)
    max3 = float(G3.abs().max())
    hop2 = [k for k in HOP2_KINDS if k in available_kinds(cfg)]
    result = {
        "config": asdict(cfg),
        "mix3": dict(training_mixture(cfg, mix3)),
        "mix2": dict(training_mixture(cfg, mix2)),
        "max_abs_g1_w3": max3,
        "before": _hop_accuracies((W2_0, W3_0), cfg),
        "rows": [],
    }
    for s3 in scales3:
        eta3 = s3 / max3
        W3 = W3_0 + eta3 * G3
        G2, _ = first_order_gradients(cfg, mix2, (W2_0, W3))
        max2 = float(G2.abs().max())
        row = {
            "scale3": float(s3),
            "eta3": eta3,
            "max_abs_g1_w2": max2,
            "after_w3": _hop_accuracies((W2_0, W3), cfg),
            "after_both": [],
        }
        for s2 in scales2:
            eta2 = s2 / max2 if max2 > 0 else 0.0
            acc = _hop_accuracies((W2_0 + eta2 * G2, W3), cfg)
            row["after_both"].append({"scale2": float(s2), "eta2": eta2, "accuracy": acc})
        result["rows"].append(row)
    solving = [
        {"scale3": r["scale3"], "eta3": r["eta3"], "scale2": c["scale2"], "eta2": c["eta2"]}
        for r in result["rows"]
        for c in r["after_both"]
        if hop2 and all(c["accuracy"][k] >= SOLVED for k in hop2)
    ]
    result["solving"] = solving
    result["smallest"] = min(solving, key=lambda d: (d["eta3"], d["eta2"])) if solving else None
    result["best"] = _best(result, hop2)
    return result


def _best(result: dict, hop2: list[str]) -> dict | None:
    """The grid pair with the highest mean 2-hop accuracy (first in grid order on ties)."""
    best, best_score = None, -1.0
    for r in result["rows"]:
        for c in r["after_both"]:
            score = float(np.mean([c["accuracy"][k] for k in hop2])) if hop2 else 0.0
            if score > best_score + 1e-12:
                best, best_score = {"scale3": r["scale3"], "eta3": r["eta3"], **c}, score
    return best


def one_step_each_markdown(result: dict) -> str:
    """``one_step_each`` as markdown: per eta3, accuracy after the W3 step and after the best
    W2 step (highest mean 2-hop accuracy), then the verdict."""
    c = result["config"]
    kinds = list(result["before"])
    lines = [
        f"One step of W3 then one step of W2, p={c['p']}, K={c['K']}, pointers="
        f"{c['pointers']}, beta={c['beta']}, L={c['L']}; G1^(3) on {result['mix3']}, "
        f"G1^(2) on {result['mix2']}; max|G1^(3)| = {result['max_abs_g1_w3']:.6g}",
        "",
        "| eta3*max|G3| | max|G2| at W3 | after | best eta2*max|G2| | " + " | ".join(kinds) + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in kinds) + " |",
        "| W0 | | before | | " + " | ".join(f"{result['before'][k]:.4f}" for k in kinds) + " |",
    ]
    hop2 = [k for k in HOP2_KINDS if k in kinds]
    for r in result["rows"]:
        lines.append(
            f"| {r['scale3']:.4g} | {r['max_abs_g1_w2']:.3g} | W3 step | | "
            + " | ".join(f"{r['after_w3'][k]:.4f}" for k in kinds)
            + " |"
        )
        if not r["after_both"]:
            continue
        best = max(
            r["after_both"],
            key=lambda cell: np.mean([cell["accuracy"][k] for k in hop2]) if hop2 else 0.0,
        )
        lines.append(
            f"| | | + W2 step | {best['scale2']:.4g} | "
            + " | ".join(f"{best['accuracy'][k]:.4f}" for k in kinds)
            + " |"
        )
    lines.append("")
    if result["smallest"] is None:
        b = result["best"]
        where = (
            f"; best pair: eta3*max|G3| = {b['scale3']:.4g}, eta2*max|G2| = {b['scale2']:.4g}, "
            + ", ".join(f"{k} {b['accuracy'][k]:.4f}" for k in hop2)
            if b
            else ""
        )
        lines.append(f"No (eta3, eta2) of the grid solves every 2-hop sequence{where}.")
    else:
        s = result["smallest"]
        lines.append(
            f"Smallest solving pair: eta3 = {s['eta3']:.6g} (x max|G3| = {s['scale3']:.4g}), "
            f"eta2 = {s['eta2']:.6g} (x max|G2| = {s['scale2']:.4g}); "
            f"{len(result['solving'])} solving pairs in the grid."
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
def random_embedding(
    cfg: SimConfig,
    dims: list[int],
    eta: float | None = None,
    seeds: int = 3,
    recompute: bool = True,
) -> dict:
    """2-var (and 0/1-var) accuracy of the one-step W1 in Gaussian embeddings of dimension d.

    ``mapped``: W1 = E^T (W0 + eta G1) E with G1 from the orthogonal model.
    ``recomputed``: W1 = E^T W0 E + eta G1_d, where G1_d = -grad_{W in R^{d x d}} of the
    first-order term E[mean F - F_y*] of the random model itself at E^T W0 E.  By the chain
    rule through W_eff = E W E^T, G1_d = E^T Ghat E with Ghat the gradient in W_eff, so
    W1 = E^T (W0 + eta Ghat) E and only dim x dim matrices are needed.  eta defaults to twice
    the smallest eta that solves 2-var in the orthogonal model (found by ``one_step``)."""
    W0, G1 = initial_W(cfg), g1(cfg, "1var")
    ortho = one_step(cfg)
    if eta is None:
        if not ortho.solving_intervals:
            raise ValueError("no eta solves 2-var in the orthogonal model; pass eta")
        eta = 2.0 * ortho.solving_intervals[0][0]
    rows = []
    for d in dims:
        for seed in range(seeds):
            geo = RandomGeometry(cfg, d, seed)
            row = {"d": d, "seed": seed}
            row["before"] = accuracies(W0, cfg, geo)
            row["mapped"] = accuracies(W0 + eta * G1, cfg, geo)
            if recompute:
                ghat = g1(cfg, "1var", W=geo.effective_W(W0), geometry=ReadoutOnly(geo.readout))
                row["recomputed"] = accuracies(W0 + eta * ghat, cfg, geo)
            rows.append(row)
    return {
        "config": asdict(cfg),
        "eta": eta,
        "orthogonal_after": accuracies(W0 + eta * G1, cfg),
        "dim_basis": Basis.from_config(cfg).dim,
        "population_2var": population_size(cfg, "2var"),
        "rows": rows,
    }


def random_embedding_table(result: dict) -> str:
    """Markdown: per d, mean (min) over seeds of the 2-var accuracy."""
    variants = [v for v in ("before", "mapped", "recomputed") if v in result["rows"][0]]
    lines = [
        f"Random Gaussian embeddings (basis dim {result['dim_basis']}), eta = "
        f"{result['eta']:.6g}; orthogonal model after the step: "
        + ", ".join(f"{k} {v:.4f}" for k, v in result["orthogonal_after"].items()),
        "",
        "| d | seeds | "
        + " | ".join(f"2-var {v} mean (min)" for v in variants)
        + " | 0-var mapped | 1-var mapped |",
        "| --- | --- | " + " | ".join("---" for _ in variants) + " | --- | --- |",
    ]
    for d in sorted({r["d"] for r in result["rows"]}):
        rs = [r for r in result["rows"] if r["d"] == d]
        cells = []
        for v in variants:
            a = [r[v]["2var"] for r in rs]
            cells.append(f"{np.mean(a):.4f} ({min(a):.4f})")
        z = np.mean([r["mapped"]["0var"] for r in rs])
        o = np.mean([r["mapped"]["1var"] for r in rs])
        lines.append(f"| {d} | {len(rs)} | " + " | ".join(cells) + f" | {z:.4f} | {o:.4f} |")
    return "\n".join(lines)
