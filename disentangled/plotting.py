"""Figures for the dynamics (one or two hops) and random-embedding experiments (matplotlib),
written to files.

Importing this module selects no matplotlib backend (a notebook keeps its own); `python -m
disentangled` selects Agg in its entry point (disentangled.command_line.use_cli_backend).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

KIND_NAMES = {"0var": "0-var", "1var": "1-var", "2var": "2-var"}


def _config_text(cfg: dict) -> str:
    return (
        f"p={cfg['p']}, K={cfg['K']}, beta={cfg['beta']:g}, L={cfg['L']}, "
        f"operands {cfg['operand_order']}"
    )


def _save(fig, path: str | Path, dpi: int) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_dynamics(result: dict, path: str | Path) -> Path:
    """Three panels over gradient steps: accuracies, attention masses, the ebar-ebar block."""
    hist = result["history"]
    steps = [h["step"] for h in hist]
    mix = ", ".join(f"{KIND_NAMES[k]} {w:.2g}" for k, w in result["mix"].items())
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))

    ax = axes[0]
    for k in ("0var", "1var", "2var"):
        ax.plot(steps, [h["accuracy"][k] for h in hist], label=f"{KIND_NAMES[k]} accuracy")
    ax.plot(steps, [h["loss"] for h in hist], "k:", label="training loss (nats)")
    ax.set_xlabel("gradient step")
    ax.set_ylabel("exact population accuracy / loss")
    ax.set_title("Accuracy (label = unique argmax)")
    ax.legend(fontsize=8)

    ax = axes[1]
    ax.plot(steps, [h["bound_mass"]["1var"] for h in hist], label="1-var: bound number slot")
    ax.plot(steps, [h["bound_mass"]["2var"] for h in hist], label="2-var: both bound slots")
    ax.plot(
        steps,
        [h["operand_number_mass"]["1var"] for h in hist],
        "--",
        label="1-var: number operand",
    )
    ax.plot(
        steps,
        [h["operand_number_mass"]["0var"] for h in hist],
        "--",
        label="0-var: both number operands",
    )
    ax.set_xlabel("gradient step")
    ax.set_ylabel("mean attention mass of '='")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Where the query '=' attends")
    ax.legend(fontsize=8)

    ax = axes[2]
    blocks = np.array([h["ebar_block"] for h in hist])  # (steps, K, K)
    K = blocks.shape[1]
    for u in range(K):
        ax.plot(steps, blocks[:, u, u], label=f"W[bar_v{u}, bar_v{u}] (diagonal)")
    ax.plot(steps, [h["ebar_offdiag_mean"] for h in hist], "k--", label="off-diagonal mean")
    ax.set_xlabel("gradient step")
    ax.set_ylabel("entry of W (query row, key column)")
    ax.set_title("Associative memory block bar_v x bar_v")
    ax.legend(fontsize=8)

    fig.suptitle(
        f"Gradient descent on the key-query matrix W from W0 ({_config_text(result['config'])}; "
        f"xi={result['xi']:g}, lr={result['lr']:g}; training mix: {mix})"
    )
    return _save(fig, path, 110)


def plot_two_hop_dynamics(result: dict, path: str | Path) -> Path:
    """Two hops: accuracy per kind, and the middle layer's pointer mass and the last layer's
    value mass, against the step."""
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
    return _save(fig, path, 100)


def plot_random_embedding(result: dict, path: str | Path) -> Path:
    """2-var accuracy after one step vs embedding dimension d (mean and range over seeds)."""
    rows = result["rows"]
    dims = sorted({r["d"] for r in rows})
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    labels = {
        "mapped": "after step, G1 from orthogonal model mapped in",
        "recomputed": "after step, G1 recomputed in random model",
        "before": "before step (W0 mapped in)",
    }
    for variant in ("mapped", "recomputed", "before"):
        if variant not in rows[0]:
            continue
        acc = [[r[variant]["2var"] for r in rows if r["d"] == d] for d in dims]
        mean = [np.mean(a) for a in acc]
        ax.plot(dims, mean, "o-", label=labels[variant])
        ax.fill_between(dims, [min(a) for a in acc], [max(a) for a in acc], alpha=0.2)
    ax.axhline(result["orthogonal_after"]["2var"], color="k", ls=":", label="orthogonal model")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"embedding dimension d (basis has {result['dim_basis']} vectors)")
    ax.set_ylabel("exact 2-var population accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"One step W0 + eta G1 with Gaussian embeddings\n"
        f"({_config_text(result['config'])}; eta={result['eta']:.4g}; band = min..max over seeds)"
    )
    ax.legend(fontsize=8)
    return _save(fig, path, 110)
