"""The comparison at one snapshot: `analyse_snapshot` reads a checkpoint (and its successor)
in the theorem's coordinates and holds every observed matrix of W_QK's space (the gradients
on the 1-var batch, the updates to the successor) against G1 in every frame, with the
metrics, the theorem's terms, the noise floor and the assumptions (docs/compare_qk.md).

    scalars, blocks = analyse_snapshot(model, task, batch, opts, next_model, predict, decay)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor

from empirical.bridge.compare_qk.coords import col_labels, coordinates, row_labels, theorem_w
from empirical.bridge.compare_qk.frames import FRAMES, READ, Frames, check_frame
from empirical.bridge.compare_qk.metrics import (
    attenuation_entries,
    barv_block,
    gram_draws,
    gram_null95,
    identity_score,
    sign_agreement,
    sign_flips,
    sign_null95,
    subblock,
    subblock_cosines,
    theorem_terms,
)
from empirical.bridge.compare_qk.observe import (
    Gradients,
    Weights,
    embedding_measures,
    gradients,
    layer1,
    layer1_measures,
    layer2,
    layer2_attention,
    one_var_batch,
    oracle_routing_accuracy,
    ov2_mlp2_accuracy,
    split_gradients,
)
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.prediction import beta_from_ab, make_predictor
from empirical.bridge.compare_qk.updates import score_attribution, undecayed_update
from empirical.task.pairs import held_out_pairs

NULL_SUBS = ("all", "barv_barv")  # sub-blocks with a sign-randomised null


def term_summary(M, rows, cols, L) -> dict:
    """The theorem's decomposition of a block (metrics.theorem_terms) without the blocks."""
    d = theorem_terms(M, rows, cols, L)
    return {k: v for k, v in d.items() if k not in ("terms", "rho")}


@dataclass
class BatchGradients:
    """The snapshot's layer-2 gradients on the 1-var batch: cross-entropy and first-order,
    each with its two halves (None for a batch of fewer than 4 sequences), and the forward's
    logits and `=`'s layer-2 pattern."""

    ce: Gradients
    lin: Gradients
    ce_halves: tuple[Gradients, Gradients] | None
    lin_halves: tuple[Gradients, Gradients] | None
    logits: Tensor
    pattern2: Tensor

    @classmethod
    def of(cls, w: Weights, resid1: Tensor, labels: Tensor) -> BatchGradients:
        if len(labels) >= 4:
            grads = split_gradients(w, resid1, labels, ("ce", "first_order"))
            ce, lin = grads["ce"], grads["first_order"]
            return cls(ce[0], lin[0], ce[1:], lin[1:], *grads["forward"])
        g_ce = gradients(w, resid1, labels, "ce")
        g_lin = gradients(w, resid1, labels, "first_order")
        return cls(g_ce, g_lin, None, None, *layer2(w, resid1))


def update_matrices(model, next_model, W: Tensor, decay: float | None) -> tuple[dict, dict]:
    """({diff, diff_nodecay, diff_perp}, the "decay" record) for the update from `model` (its
    W_QK `W`) to `next_model`; decay: `updates.decay_factor` over the interval (None: 1)."""
    D = theorem_w(next_model) - W
    c = 1.0 if decay is None else float(decay)
    a1, a2 = model.blocks[1].attn, next_model.blocks[1].attn
    f64 = [t.W_Q[0].detach().double() for t in (a1, a2)]
    k64 = [t.W_K[0].detach().double() for t in (a1, a2)]
    mats = {
        "diff": D,
        "diff_nodecay": undecayed_update(f64[0], k64[0], f64[1], k64[1], c),
        "diff_perp": D - (D * W).sum() / (W * W).sum() * W,
    }
    record = {
        "factor_per_factor": c,
        # the merged matrix's decay (c^2 - 1) against the update's component along W
        "merged_decay_fraction_of_W": c * c - 1.0,
        "update_along_W_fraction": float((D * W).sum() / (W * W).sum()),
    }
    return mats, record


@dataclass
class Nulls:
    """What the null levels of one snapshot's comparisons draw on (None where G1 is not
    defined): random sign patterns, and unrelated predictions pushed through the Gram
    matrices (the score frame's null)."""

    signs: np.ndarray | None
    GQ: np.ndarray
    GK: np.ndarray
    gram: np.ndarray | None


def compare_block(pred, obs, rows, cols, att_entries, nulls: Nulls) -> dict:
    """One observed block against the prediction in the same frame: sub-block cosines, the
    bar_v block's identity score, the attenuation signs, sizes and the sign-randomised null."""

    def null(sub: str) -> float:
        if nulls.signs is None:
            return float("nan")
        return sign_null95(subblock(pred, rows, cols, sub), subblock(obs, rows, cols, sub),
                           nulls.signs)  # fmt: skip

    return {
        "cos": subblock_cosines(pred, obs, rows, cols),
        "identity": identity_score(barv_block(obs, rows, cols)),
        "attenuation": sign_agreement(pred, obs, rows, cols, att_entries),
        "norm": float(np.linalg.norm(obs)),
        "max_abs": float(np.abs(obs).max()),
        "null95_signs": {sub: null(sub) for sub in NULL_SUBS},
    }


def compare_frames(read: dict, preds: dict, rows, cols, att_entries, nulls: Nulls) -> dict:
    """frame -> {"weights_identity", variant: `compare_block`} for every frame; `read`: name
    -> reading -> block ("weights" first, then the observed variants)."""
    variants = [v for v in read if v != "weights"]
    comp: dict = {}
    for f in FRAMES:
        S_w = read["weights"][READ[f]]
        comp[f] = {"weights_identity": identity_score(barv_block(S_w, rows, cols))}
        for vname in variants:
            obs = read[vname][READ[f]]
            entry = compare_block(preds[f], obs, rows, cols, att_entries, nulls)
            if f == "score" and nulls.gram is not None:
                entry["null95_gram"] = gram_null95(nulls.GQ, nulls.GK, obs, rows, cols,
                                                   X=nulls.gram)  # fmt: skip
            comp[f][vname] = entry
    return comp


def term_summaries(read: dict, preds: dict, frame: str, rows, cols, L, valid: bool) -> dict:
    """The theorem's terms (assignment-wide, memory, attenuation) in the prediction and each
    observed matrix, read in the headline frame; the state by its scores between the
    labelled vectors (raw: the attention it produces, what the paper's remark on the
    all-assignment term is about), and also in the headline frame ('weights_frame')."""
    terms = {"pred": term_summary(preds[frame], rows, cols, L) if valid else None}
    terms["weights"] = term_summary(read["weights"]["raw"], rows, cols, L)
    terms["weights_frame"] = term_summary(read["weights"][READ[frame]], rows, cols, L)
    for vname in read:
        if vname != "weights":
            terms[vname] = term_summary(read[vname][READ[frame]], rows, cols, L)
    return terms


def split_half_cosines(g: BatchGradients, fr: Frames, frame: str, rows, cols) -> dict:
    """The noise floor: cosines of each gradient's two halves of the batch, headline frame."""
    r = READ[frame]
    return {
        f"split_half_cos_grad_{name}": subblock_cosines(
            fr.read(-h1.G_QK, r), fr.read(-h2.G_QK, r), rows, cols
        )
        for name, (h1, h2) in (("ce", g.ce_halves), ("lin", g.lin_halves))
    }


def analyse_snapshot(
    model, task, batch, opts: Options, next_model=None, predict=None, decay: float | None = None
) -> tuple[dict, dict]:
    """(scalars, blocks) for one checkpoint. blocks: name -> labelled array ('pred': G1;
    'pred_dual', 'pred_score': G1 in the exact frames; '{reading}/{variant}': the observed
    matrices read raw / orth / dual). predict: (a, b) -> the predicted block (default:
    `make_predictor(task, opts)`). decay: `updates.decay_factor` over the interval to
    `next_model` (None: 1, no decay), for the `diff_nodecay` variant."""
    p, K, L = task.p, task.K, task.L
    frame = check_frame(opts.frame)
    predict = make_predictor(task, opts) if predict is None else predict
    w = Weights.of(model)
    raw = coordinates(model, p, K, L)
    fr = Frames(raw)
    rows, cols = raw.rows, raw.cols
    l1 = layer1(w, batch.tokens)
    g = BatchGradients.of(w, l1.resid1, batch.labels)
    att = layer2_attention(g.pattern2, batch, p, K)
    a, b = att[f"a_{opts.ab_from}"], att[f"b_{opts.ab_from}"]
    out: dict = {
        "batch_accuracy": float((g.logits.argmax(-1) == batch.labels).double().mean()),
        "attention": att,
        "a": a,
        "b": b,
        "beta": beta_from_ab(a, b) if a > 0 and b > 0 else float("nan"),
        "frame_exact": raw.exact,
        "frame_deficit": list(raw.deficit()),
        "prediction": getattr(predict, "kind", "custom"),
    }
    valid = 0 < a < 0.5 and b > 0
    pred = predict(a, b) if valid else np.full((len(rows), len(cols)), np.nan)
    preds = {f: fr.predicted(pred, f) if valid else pred for f in FRAMES}
    blocks = {"pred": pred, "pred_dual": preds["dual"], "pred_score": preds["score"]}
    # how much of G1 the checkpoint's vectors can express (1 without merged labels)
    out["pred_recoverable"] = (
        float(np.linalg.norm(preds["dual"]) / np.linalg.norm(pred)) if valid else float("nan")
    )

    out["loss_ce"], out["loss_lin"] = g.ce.loss, g.lin.loss
    W = theorem_w(model)
    mats = {"grad_ce": -g.ce.G_QK, "grad_lin": -g.lin.G_QK, "sgd_factored": g.ce.factored_change(w)}
    if next_model is not None:
        updates, out["decay"] = update_matrices(model, next_model, W, decay)
        mats |= updates
    att_entries = attenuation_entries(rows, cols, L, getattr(predict, "order", opts.order))
    read = {"weights": fr.readings(W)} | {vname: fr.readings(M) for vname, M in mats.items()}
    for name, readings in read.items():
        for reading, S in readings.items():
            blocks[f"{reading}/{name}"] = S
    GQ, GK = raw.gram()
    nulls = Nulls(
        signs=sign_flips(len(rows) * len(cols), opts.null_draws) if valid else None,
        GQ=GQ, GK=GK, gram=gram_draws(GQ, GK, pred.shape) if valid else None,
    )  # fmt: skip
    out["comparison"] = compare_frames(read, preds, rows, cols, att_entries, nulls)
    out["pred_identity"] = identity_score(barv_block(pred, rows, cols))
    out["terms"] = term_summaries(read, preds, frame, rows, cols, L, valid)
    if g.ce_halves is not None:
        out |= split_half_cosines(g, fr, frame, rows, cols)
    if next_model is not None:
        nxt = coordinates(next_model, p, K, L)
        out["score_change"] = score_attribution(raw, nxt, W, theorem_w(next_model))
    out["assumptions"] = {
        **layer1_measures(l1, w, batch, p, K),
        "oracle_routing_accuracy": oracle_routing_accuracy(w, l1.resid1, batch),
        "embeddings": embedding_measures(w, p, K, L),
    }
    out["assumptions"]["ov2_mlp2_accuracy"], out["ov2_mlp2_source"] = ov2_mlp2_accuracy(model, task)
    return out, blocks


def comparison_inputs(task, seed: int, opts: Options) -> tuple:
    """(the held-out pairs or None, the comparison's 1-var batch, its G1 predictor) for a run
    of `task` and `seed`, as compare-qk builds them."""
    held = held_out_pairs(task, seed) if opts.distribution == "train" else None
    batch = one_var_batch(
        task, opts.batch_size, opts.seed, opts.order, opts.distribution, held, opts.all_assigned
    )
    return held, batch, make_predictor(task, opts, held_out=held)


def g1_direction(cfg, model, batch_size: int = 2048, prediction_size: int = 16384):
    """(G1 in compare-qk's dual frame at `model` [R, C], rows, cols, info): the theory's
    first-order W_QK gradient at the checkpoint's measured attention (a, b), as compare-qk
    predicts it (its default options but the sizes)."""
    opts = Options(batch_size=batch_size, prediction_size=prediction_size)
    task = cfg.task
    _, batch, predict = comparison_inputs(task, cfg.seed, opts)
    scalars, blocks = analyse_snapshot(model, task, batch, opts, None, predict)
    G = np.asarray(blocks["pred_dual"], dtype=float)
    if not np.isfinite(G).all():
        raise ValueError(
            f"G1 is not defined at this checkpoint (measured a = {scalars['a']:.3g}, "
            f"b = {scalars['b']:.3g}: needs 0 < a < 0.5 and b > 0)"
        )
    info = {"a": scalars["a"], "b": scalars["b"], "prediction": scalars["prediction"]}
    return G, row_labels(task.K, task.L), col_labels(task.p, task.K, task.L), info
