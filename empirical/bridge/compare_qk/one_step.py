"""The one-step test: the theorem's "one step on 1-var data" tried on a real snapshot: steps
on layer-2 W_Q, W_K only, and every evaluation set's accuracy after each (docs/compare_qk.md,
"One step on the real model").

    out = one_step_experiment(model, task, batch, sets, opts, order, predict)
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor

from empirical.bridge.compare_qk.coords import coordinates, set_qk, theorem_w
from empirical.bridge.compare_qk.frames import READ, Frames, check_frame
from empirical.bridge.compare_qk.metrics import barv_block, cosine, identity_score
from empirical.bridge.compare_qk.observe import (
    Gradients,
    Weights,
    gradients,
    layer1,
    layer2,
    layer2_attention,
    oracle_routing_accuracy,
)
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.prediction import g1_block
from empirical.report.stats import accuracy_interval

TWO_VAR_SUBSET = 2048  # 2-var sequences whose value attention each stepped model reports


def with_interval(correct: int, n: int) -> dict:
    """{"acc", "n", "correct", "ci95"}: Wilson 95% interval (empirical.report.stats)."""
    lo, hi = accuracy_interval(correct, n) if n else (float("nan"), float("nan"))
    return {"acc": correct / n if n else float("nan"), "n": n, "correct": correct,
            "ci95": [lo, hi]}  # fmt: skip


@torch.no_grad()
def _value_attention(w: Weights, l1_resid, batch) -> float:
    """Mean layer-2 attention of `=` on the value positions (both operands' values)."""
    _, pat = layer2(w, l1_resid)
    rows = torch.arange(len(batch))
    vp = batch.value_positions
    same = vp[:, 0] == vp[:, 1]
    mass = pat[rows, vp[:, 0]] + torch.where(same, 0.0, pat[rows, vp[:, 1]])
    return float(mass.mean())


class StepProbe:
    """A snapshot and what each model stepped from it is measured by (the batch's layer-1
    residuals, G1 in the headline frame, the starting W_QK and its readings). `two`: the
    2-var set (None: no value attention); predict: (a, b) -> G1 (default: closed form)."""

    def __init__(self, model, task, batch, two, opts: Options, order: str, predict=None):
        p, K, L = task.p, task.K, task.L
        self.model, self.batch = model, batch
        self.w0 = Weights.of(model)
        self.raw = coordinates(model, p, K, L)
        self.orth = self.raw.orthonormalized()
        self.frames = Frames(self.raw)
        self.frame = check_frame(opts.frame)
        self.resid1 = layer1(self.w0, batch.tokens).resid1
        _, pattern2 = layer2(self.w0, self.resid1)
        att = layer2_attention(pattern2, batch, p, K)
        self.a, self.b = att[f"a_{opts.ab_from}"], att[f"b_{opts.ab_from}"]
        if predict is None:
            self.pred = g1_block(self.a, self.b, p, K, L, order, opts.layout)
        else:
            self.pred = predict(self.a, self.b)
        self.pred_f = self.frames.predicted(self.pred, self.frame)
        self.two_sub = two.slice(0, TWO_VAR_SUBSET) if two is not None else None
        # layer 1 is not changed by any step: its residuals are computed once
        self.two_resid = layer1(self.w0, self.two_sub.tokens).resid1 if two is not None else None
        self.W0 = theorem_w(model)
        self.S0_raw, self.S0_orth = self.raw.project(self.W0), self.orth.project(self.W0)

    def measures(self, m) -> dict:
        """What a stepped model gives on the batch (its set accuracies: `_with_accuracies`)."""
        w = Weights.of(m)
        res: dict = {"_weights": w}
        logits, _ = layer2(w, self.resid1)
        res["batch_loss"] = float(torch.nn.functional.cross_entropy(logits, self.batch.labels))
        if self.two_sub is not None:
            res["2var_value_attention"] = _value_attention(w, self.two_resid, self.two_sub)
        S_raw, S_orth = self.raw.project(theorem_w(m)), self.orth.project(theorem_w(m))
        res["raw_identity"] = identity_score(barv_block(S_raw, self.raw.rows, self.raw.cols))
        res["orth_identity"] = identity_score(barv_block(S_orth, self.raw.rows, self.raw.cols))
        return res

    def rms_dscore(self, D) -> float:
        """RMS over the batch's sequences and positions of the change of `=`'s layer-2
        scores when W_QK changes by D."""
        last = self.resid1[:, -1]
        d = torch.einsum("bd,bld->bl", last @ D.to(last.dtype), self.resid1) / self.w0.scale
        return float(d.pow(2).mean().sqrt())

    def moved(self, m) -> dict:
        """How far a stepped model's W_QK moved, and its cosine with G1 in the headline frame
        (and, legacy, the orth frame against G1 itself)."""
        W = theorem_w(m)
        return {
            "rms_dscore": self.rms_dscore(W - self.W0),
            "max_abs_dS_raw": float(np.abs(self.raw.project(W) - self.S0_raw).max()),
            "max_abs_dS_orth": float(np.abs(self.orth.project(W) - self.S0_orth).max()),
            "cos_dS_G1": cosine(self.frames.read(W - self.W0, READ[self.frame]), self.pred_f),
            "cos_dS_orth_G1": cosine(self.orth.project(W) - self.S0_orth, self.pred),
        }

    def with_qk(self, W):
        """A copy of the snapshot with layer 2's W_QK = W."""
        m = copy.deepcopy(self.model)
        set_qk(m, W)
        return m

    def row(self, m, size: dict) -> dict:
        return {**size, **self.moved(m), **self.measures(m)}


def sgd_rows(probe: StepProbe, g0: Gradients, opts: Options) -> list[dict]:
    """Plain SGD on W_Q, W_K, opts.one_step_steps full-batch steps per learning rate (layer
    1 unchanged: the batch's residuals stay the probe's)."""
    rows = []
    for lr in opts.one_step_lrs:
        m = copy.deepcopy(probe.model)
        for k in range(opts.one_step_steps):
            g = g0 if k == 0 else gradients(Weights.of(m), probe.resid1, probe.batch.labels, "ce")
            attn = m.blocks[1].attn
            with torch.no_grad():
                attn.W_Q[0].sub_(lr * g.G_Q.to(attn.W_Q.dtype))
                attn.W_K[0].sub_(lr * g.G_K.to(attn.W_K.dtype))
        rows.append(probe.row(m, {"lr": lr}))
    return rows


def step_directions(probe: StepProbe, g0: Gradients, seed: int) -> dict[str, Tensor]:
    """The non-SGD families' directions of W_QK (`one_step_experiment`), unscaled."""
    rng = np.random.default_rng(seed + 1)
    R = rng.standard_normal(probe.pred.shape)
    return {
        "grad_merged": -g0.G_QK,
        "predicted_grad": probe.raw.gradient_of(probe.pred),
        "predicted_orth": probe.orth.lift(probe.pred),
        "predicted_raw": probe.raw.lift(probe.pred),
        "random_orth": probe.orth.lift(R),
    }


def one_step_experiment(
    model, task, batch, sets: dict, opts: Options, order: str, predict=None
) -> dict:
    """Steps on layer-2 W_Q, W_K from `model` on the 1-var `batch` (operand order `order`, the
    prediction's too) per family, and every set's accuracy after each (the first
    opts.eval_size of each; Wilson 95% intervals). predict: (a, b) -> G1 (default: the closed
    form). Families and sizes: docs/compare_qk.md, "One step on the real model"."""
    names = list(sets)
    if opts.eval_size:
        sets = {n: sets[n].slice(0, opts.eval_size) for n in names}
    probe = StepProbe(model, task, batch, sets.get("2var/ind"), opts, order, predict)
    w0 = probe.w0
    out = {
        "before": probe.measures(model), "a": probe.a, "b": probe.b, "order": order,
        "families": {}, "set_sizes": {n: len(sets[n]) for n in names},
        "prediction": getattr(predict, "kind", "closed"),
        "prediction_distribution": getattr(predict, "distribution", "unrestricted"),
        "frame": probe.frame,
    }  # fmt: skip
    # what ideal routing would give (no key-query update can do better downstream)
    n = TWO_VAR_SUBSET
    out["oracle_routing_accuracy"] = {
        name: oracle_routing_accuracy(w0, layer1(w0, sets[name].tokens[:n]).resid1, sets[name][:n])
        for name in names
    }
    g0 = gradients(w0, probe.resid1, batch.labels, "ce")
    out["families"]["sgd"] = sgd_rows(probe, g0, opts)
    # the other steps: a direction D, scaled so that rms_dscore(t D) = t
    for fam, D in step_directions(probe, g0, opts.seed).items():
        D = D / probe.rms_dscore(D)
        out["families"][fam] = [probe.row(probe.with_qk(probe.W0 + t * D), {"t": t})
                                for t in opts.score_steps]  # fmt: skip
    rows = [out["before"]] + [r for rs in out["families"].values() for r in rs]
    _with_accuracies(rows, w0, sets, next(model.parameters()).dtype)
    return out


def _with_accuracies(rows: list[dict], w0: Weights, sets: dict, dtype) -> None:
    """Put each set's accuracy and interval into every row (rows carry their model's weights
    as "_weights", removed here)."""
    counts = _correct_each([r.pop("_weights") for r in rows], w0, sets, dtype)
    for row, c in zip(rows, counts, strict=True):
        row.update({n: c[n] / max(len(sets[n]), 1) for n in sets})
        row["intervals"] = {n: with_interval(c[n], len(sets[n])) for n in sets}


@torch.no_grad()
def _correct_each(
    ws: list[Weights], w0: Weights, sets: dict, dtype=torch.float32, chunk: int = 2048
) -> list[dict]:
    """[{set: correct}] for models that differ from w0 in layer 2's W_Q, W_K only: layer 1's
    residuals of each chunk are computed once and each model's layer 2 (in `dtype`) reads them."""
    counts: list[dict] = [dict.fromkeys(sets, 0) for _ in ws]
    ws = [w.to(dtype) for w in ws]
    for name, batch in sets.items():
        for i in range(0, len(batch), chunk):
            resid1 = layer1(w0, batch.tokens[i : i + chunk]).resid1.to(dtype)
            labels = batch.labels[i : i + chunk]
            for c, w in zip(counts, ws, strict=True):
                c[name] += int((layer2(w, resid1)[0].argmax(-1) == labels).sum())
    return counts
