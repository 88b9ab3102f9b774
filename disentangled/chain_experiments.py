"""Experiments on the two-hop chain model: one step of W3 then one step of W2 (question 4
of chain.md), and gradient descent on W2, W3 or both.

Accuracy is C.1's (``metrics.unique_argmax_correct``): a sequence is correct only if its
label is the unique argmax of F.  Every number is an exact population value.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import torch

from .basis import Basis
from .chain_config import CHAIN_KINDS, ChainConfig
from .chain_gradient import Mix, chain_g1, chain_gradients, chain_mixture
from .chain_model import chain_forward, initial_pair
from .chain_population import chain_population
from .metrics import unique_argmax_correct

SOLVED = 1.0 - 1e-12
HOP2_KINDS = ("1var-2hop", "2var-2hop")
TRAINABLE = ("both", "w2", "w3")


def available_kinds(cfg: ChainConfig) -> tuple[str, ...]:
    """The kinds that have sequences (no 2-hop kinds when pointers = 0)."""
    return tuple(k for k in CHAIN_KINDS if cfg.pointers > 0 or "2hop" not in k)


@torch.no_grad()
def chain_stats(W2: torch.Tensor, W3: torch.Tensor, cfg: ChainConfig) -> dict[str, dict]:
    """Per kind: accuracy, layer-3 attention mass on the number slots the query resolves
    to (``bound_mass``) and layer-2 attention mass on the right-hand side of a queried
    pointer (``pointer_mass``, 2-hop kinds)."""
    basis = Basis(cfg.p, cfg.K, cfg.L)
    out = {}
    for kind in available_kinds(cfg):
        chunk = chain_population(cfg, kind)
        sigma2, _, sigma3, F = chain_forward(W2, W3, chunk, cfg, basis)
        w = chunk.weights
        out[kind] = {
            "accuracy": float((w * unique_argmax_correct(F, chunk.labels)).sum()),
            "bound_mass": float((w * (sigma3 * chunk.bound).sum(1)).sum()),
            "pointer_mass": float((w * (sigma2 * chunk.pointer_rhs).sum(1)).sum()),
        }
    return out


def chain_accuracies(W2, W3, cfg: ChainConfig) -> dict[str, float]:
    return {k: v["accuracy"] for k, v in chain_stats(W2, W3, cfg).items()}


def _solves(acc: dict[str, float], kinds) -> bool:
    return all(acc[k] >= SOLVED for k in kinds)


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
    W2_0, W3_0 = initial_pair(cfg)
    _, G3 = chain_g1(cfg, mix3)
    max3 = float(G3.abs().max())
    hop2 = [k for k in HOP2_KINDS if k in available_kinds(cfg)]
    result = {
        "config": asdict(cfg),
        "mix3": dict(chain_mixture(cfg, mix3)),
        "mix2": dict(chain_mixture(cfg, mix2)),
        "max_abs_g1_w3": max3,
        "before": chain_accuracies(W2_0, W3_0, cfg),
        "rows": [],
    }
    for s3 in scales3:
        eta3 = s3 / max3
        W3 = W3_0 + eta3 * G3
        G2, _ = chain_g1(cfg, mix2, W2_0, W3)
        max2 = float(G2.abs().max())
        row = {
            "scale3": float(s3),
            "eta3": eta3,
            "max_abs_g1_w2": max2,
            "after_w3": chain_accuracies(W2_0, W3, cfg),
            "after_both": [],
        }
        for s2 in scales2:
            eta2 = s2 / max2 if max2 > 0 else 0.0
            acc = chain_accuracies(W2_0 + eta2 * G2, W3, cfg)
            row["after_both"].append({"scale2": float(s2), "eta2": eta2, "accuracy": acc})
        result["rows"].append(row)
    solving = [
        {"scale3": r["scale3"], "eta3": r["eta3"], "scale2": c["scale2"], "eta2": c["eta2"]}
        for r in result["rows"]
        for c in r["after_both"]
        if hop2 and _solves(c["accuracy"], hop2)
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


def one_step_markdown(result: dict) -> str:
    """The search as markdown: per eta3, accuracy after the W3 step and after the best W2
    step (highest mean 2-hop accuracy), then the verdict."""
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


def chain_dynamics(
    cfg: ChainConfig,
    steps: int = 200,
    lr: float = 0.2,
    xi: float = 10.0,
    train: str = "both",
    mix: Mix = None,
) -> dict:
    """Full-batch gradient descent on the exact population of ``mix`` (default: the
    config's training mix) from (W^0, W^0); ``train`` says which matrices move ("both",
    "w2", "w3").  Returns {"config", "xi", "lr", "train", "mix", "history"}, one snapshot
    per step 0..steps: loss, per-kind accuracy, layer-3 bound mass, layer-2 pointer mass,
    and the mean diagonal of the bar_v x bar_v blocks of W2 and W3."""
    if train not in TRAINABLE:
        raise ValueError(f"train={train!r}: must be one of {', '.join(TRAINABLE)}")
    if steps < 0:
        raise ValueError(f"steps={steps}: must be >= 0")
    basis = Basis(cfg.p, cfg.K, cfg.L)
    bars = [basis.bar_v(u) for u in range(cfg.K)]
    W2, W3 = initial_pair(cfg)
    history = []
    for step in range(steps + 1):
        loss, g2, g3 = chain_gradients(W2, W3, cfg, xi, mix)
        stats = chain_stats(W2, W3, cfg)
        history.append(
            {
                "step": step,
                "loss": loss,
                "accuracy": {k: v["accuracy"] for k, v in stats.items()},
                "bound_mass": {k: v["bound_mass"] for k, v in stats.items() if k != "0var"},
                "pointer_mass": {k: v["pointer_mass"] for k, v in stats.items() if "2hop" in k},
                "w2_ebar_diag": float(W2[bars][:, bars].diagonal().mean()),
                "w3_ebar_diag": float(W3[bars][:, bars].diagonal().mean()),
            }
        )
        if step == steps:
            break
        if train in ("both", "w2"):
            W2 = W2 - lr * g2
        if train in ("both", "w3"):
            W3 = W3 - lr * g3
    return {
        "config": asdict(cfg),
        "xi": xi,
        "lr": lr,
        "train": train,
        "mix": dict(chain_mixture(cfg, mix)),
        "history": history,
    }


def plot_chain_dynamics(result: dict, path) -> str:
    """Accuracy per kind and the layer-2 pointer mass against the step (PNG)."""
    import matplotlib.pyplot as plt

    hist = result["history"]
    steps = [h["step"] for h in hist]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for kind in hist[0]["accuracy"]:
        ax1.plot(steps, [h["accuracy"][kind] for h in hist], label=kind)
    ax1.set(xlabel="gradient step", ylabel="population accuracy", title="accuracy per kind")
    ax1.legend()
    for kind in hist[0]["pointer_mass"]:
        ax2.plot(
            steps, [h["pointer_mass"][kind] for h in hist], label=f"layer 2 on pointer, {kind}"
        )
    for kind in hist[0]["bound_mass"]:
        ax2.plot(
            steps, [h["bound_mass"][kind] for h in hist], "--", label=f"layer 3 on value, {kind}"
        )
    ax2.set(xlabel="gradient step", ylabel="attention mass", title="where the query attends")
    ax2.legend(fontsize=7)
    fig.suptitle(f"chain model, train {result['train']}, lr {result['lr']}, xi {result['xi']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)
