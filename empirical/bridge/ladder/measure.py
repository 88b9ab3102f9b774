"""What the ladder measures at one rung: the layer-2 key-query gradient against G1 in
compare-qk's dual frame (cosines, null levels, the theorem's terms, the attenuation signs;
compare-qk's frames and metrics reused) and the one-step test."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from empirical.bridge.compare_qk.frames import Frames
from empirical.bridge.compare_qk.metrics import (
    attenuation_entries,
    null_cos95,
    sign_agreement,
    sign_flips,
    sign_null95,
    subblock,
    subblock_cosines,
    theorem_terms,
)
from empirical.bridge.ladder.forward import Forward

FRAME = "dual"  # compare-qk's default and exact frame


def gradient_measures(coords, direction: Tensor, G1: np.ndarray, order: str, L: int) -> dict:
    """cosines (whole block, bar_v block) of `direction` ([d, d], W_QK's space: minus a
    gradient, or an update) read in the dual frame with G1 as the dual frame sees it; the
    isotropic and sign-randomised 95% null levels; the theorem's terms of the observed block
    (memory share, all-assignment share); the attenuation signs."""
    fr = Frames(coords)
    obs = fr.read(direction, FRAME)
    pred = fr.predicted(G1, FRAME)
    rows, cols = coords.rows, coords.cols
    cos = subblock_cosines(pred, obs, rows, cols)
    signs = sign_flips(len(rows) * len(cols))
    terms = theorem_terms(obs, rows, cols, L)
    att = sign_agreement(pred, obs, rows, cols, attenuation_entries(rows, cols, L, order))
    return {
        "cos_whole": cos["all"], "cos_bar_v": cos["barv_barv"], "cos_subblocks": cos,
        "null_whole": null_cos95(obs.size),
        "null_bar_v": null_cos95(subblock(obs, rows, cols, "barv_barv").size),
        "null_signs_whole": sign_null95(pred, obs, signs),
        "null_signs_bar_v": sign_null95(
            subblock(pred, rows, cols, "barv_barv"), subblock(obs, rows, cols, "barv_barv"), signs
        ),
        "memory_share": terms["share"]["memory"],
        "all_assignment_share": terms["share"]["assignment_wide"],
        "all_assignment_vs_memory": terms["aw_share_vs_memory"], "c_mem": terms["c_mem"],
        "attenuation_sign_agreement": att["fraction"], "attenuation": att["entries"],
        "obs_block": obs, "pred_block": pred,
    }  # fmt: skip


def rms_dscore(fwd: Forward, resid1: Tensor, D: Tensor) -> float:
    """RMS over the sequences and positions of `resid1` of the change of `=`'s layer-2
    scores when the layer-2 score matrix changes by D (compare-qk's step size unit)."""
    last = resid1[:, -1]
    d = torch.einsum("bd,bld->bl", last @ D, resid1) / fwd.w.scale
    return float(d.pow(2).mean().sqrt())


class EvalCache:
    """Each evaluation set's layer-1 residuals under one rung (a step on layer 2's W_QK does
    not change them); accuracies come out with 2var/ind first."""

    def __init__(self, fwd: Forward, sets: dict, chunk: int = 2048):
        self.fwd = fwd
        self.parts = {}
        with torch.no_grad():
            for name in sorted(sets, key=lambda n: n != "2var/ind"):  # 2var/ind first
                batch = sets[name]
                self.parts[name] = [
                    (fwd.resid1(batch.tokens[i : i + chunk]), batch.labels[i : i + chunk])
                    for i in range(0, len(batch), chunk)
                ]

    @torch.no_grad()
    def accuracy(self, QK2: Tensor) -> dict[str, float]:
        """Accuracy of every set with layer-2 score matrix QK2."""
        return self.along(QK2, torch.zeros_like(QK2), [0.0])[0]

    @torch.no_grad()
    def along(self, QK2: Tensor, D: Tensor, steps) -> list[dict[str, float]]:
        """Accuracy of every set with score matrix QK2 + t D, for each t of `steps`."""
        out = [dict() for _ in steps]
        for name, pieces in self.parts.items():
            correct = [0] * len(steps)
            total = 0
            for r, y in pieces:
                last = r[:, -1]
                q0, qd = last @ QK2, last @ D
                for i, t in enumerate(steps):
                    logits, _ = self.fwd.head_from_query(r, q0 + t * qd)
                    correct[i] += int((logits.argmax(-1) == y).sum())
                total += len(y)
            for i in range(len(steps)):
                out[i][name] = correct[i] / max(total, 1)
        return out


def first_set(names) -> str:
    return "2var/ind" if "2var/ind" in names else sorted(names)[0]


def one_step(cache: EvalCache, fwd: Forward, resid1: Tensor, D: Tensor, grid) -> dict:
    """One step QK2 + t D / rms_dscore(D) for every t of `grid` (RMS change of `=`'s scores on
    the rung's batch); best_eta: the t with the best 2var/ind accuracy (ties: the smallest),
    accuracy: every set's accuracy there; best_per_set: each set's best over the grid."""
    size = rms_dscore(fwd, resid1, D)
    if not np.isfinite(size) or size == 0:
        return {"best_eta": None, "accuracy": {}, "grid": [], "best_per_set": {}}
    accs = cache.along(fwd.w.QK2, D / size, list(grid))
    rows = [{"eta": float(t), "accuracy": a} for t, a in zip(grid, accs, strict=True)]
    key = first_set(rows[0]["accuracy"])
    best = max(rows, key=lambda r: (r["accuracy"][key], -r["eta"]))
    return {
        "best_eta": best["eta"],
        "accuracy": best["accuracy"],
        "best_per_set": {n: max(r["accuracy"][n] for r in rows) for n in rows[0]["accuracy"]},
        "grid": rows,
    }
