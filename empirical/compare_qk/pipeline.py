"""Theorem C.1's predicted layer-2 key-query update against a trained run, over its snapshots.

    from empirical.compare_qk import compare_run, write_outputs
    result = compare_run("runs/paper/seed0")            # a dict of every number
    write_outputs(result, "runs/paper/seed0/compare_qk")  # JSON, blocks.npz, summary.md, PNGs

Per snapshot (docs/compare_qk.md has the definitions):
1. coordinates: labelled query/key vectors (`coords`) and their three readings ('raw',
   'orth', 'dual'); the comparison's frames (`frames`: dual, the default and exact; score,
   exact and Gram-weighted; orth and raw, the legacy readings against G1 itself);
2. the layer-2 attention of `=` on 1-var sequences -> the theorem's softmax weights a, b;
3. the prediction G1(a, b) of the theorem's model on the comparison's distribution (default:
   the run's own 1-var training distribution, mixed operand order, its restrictions);
4. observed matrices of W_QK^2's space, each read in every frame:
   grad_ce      -dL/dW_QK, cross-entropy on the 1-var batch (a merged-matrix GD step)
   grad_lin     -dL/dW_QK of the first-order loss -(f_y* - mean_y f_y) (the theorem's G1
                definition applied to the real network: small-output limit)
   sgd_factored first-order change of W_Q W_K^T under SGD on W_Q, W_K (cross-entropy)
   diff         W_QK(next snapshot) - W_QK(this one) (what training did: AdamW, weight decay,
                the full 0/1/2-var mix)
   diff_nodecay diff without AdamW's weight decay (lr x wd per step on each factor added back,
                `updates.undecayed_update`)
   diff_perp    diff minus its whole component along W_QK(this snapshot) (not the decay: at
                the paper's first spike that component is +0.062 of W, the decay -0.004)
5. cosines (whole block and sub-blocks), identity scores, attenuation signs, null levels
   (isotropic, sign-randomised, and the Gram null of the score frame);
6. the labelled score change of each update split into the W_QK part and the moving vectors'
   part (`updates.score_attribution`);
7. the theorem's assumptions, measured.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch

from disentangled.command_line import UsageError
from empirical.compare_qk.coords import coordinates, theorem_w
from empirical.compare_qk.frames import DEFAULT_FRAME, FRAMES, READ, Frames, check_frame
from empirical.compare_qk.metrics import (
    SUBBLOCKS,
    attenuation_entries,
    barv_block,
    cosine,
    identity_score,
    null_cos95,
    sign_agreement,
    sign_flips,
    sign_null95,
    subblock,
    subblock_cosines,
    theorem_terms,
)
from empirical.compare_qk.observe import (
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
from empirical.compare_qk.prediction import (
    PREDICTIONS,
    PopulationG1,
    beta_from_ab,
    closed_form_applies,
    g1_block,
)
from empirical.compare_qk.updates import score_attribution, undecayed_update
from empirical.rundir import RunDir, RunDirError

VARIANTS = ("grad_ce", "grad_lin", "sgd_factored", "diff", "diff_nodecay", "diff_perp")
NULL_SUBS = ("all", "barv_barv")  # sub-blocks with a sign-randomised null


@dataclasses.dataclass
class Options:
    """Everything `compare_run` can vary (CLI flags of `python -m empirical compare-qk`)."""

    steps: list[int] | None = None  # snapshot steps (None: all)
    every: int = 1  # use every N-th of those
    batch_size: int = 4096  # 1-var sequences for the gradients and the attention measures
    order: str = "mixed"  # 'mixed' (either operand order, as trained) or 'fixed' (theorem's)
    distribution: str = "train"  # the run's 1-var restrictions, or 'unrestricted' (theorem's)
    frame: str = DEFAULT_FRAME  # headline frame: 'dual' (exact), 'score', 'orth', 'raw'
    null_draws: int = 1000  # sign-randomised null: random sign patterns per snapshot
    all_assigned: bool = False  # every variable assigned (the theorem's sequences)
    ab_from: str = "operands"  # a from attention to the operand positions, or 'values'
    layout: str = "averaged"  # prediction's assignment-region columns: 'averaged' or 'packed'
    seed: int = 0  # data seed of the comparison's batch
    one_step: bool = True
    one_step_at: int | None = None  # snapshot step (None: first with 0var/ind >= 0.9)
    one_step_lrs: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    one_step_steps: int = 1  # plain SGD steps per learning rate
    score_steps: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)  # RMS score change
    one_step_order: str = "mixed"  # 1-var data of the one-step test: the task's operand orders
    one_step_distribution: str = "train"  # ... and the run's own training restrictions
    eval_size: int | None = 5000  # sequences per evaluation set in the one-step test (None: all)
    prediction: str = "auto"  # G1: 'closed' (theory's closed form), 'population' (sampled)
    prediction_size: int = 65536  # sequences of the sampled population ('population')
    windows: list[tuple[str, int, int]] | None = None  # (name, lo, hi); None: from the phases
    progress: bool = True


# -- helpers ---------------------------------------------------------------------------------


def gram_draws(GQ, GK, shape, draws: int = 200) -> np.ndarray:
    """[draws, rows, cols]: G_Q R G_K for iid Gaussian R (seed 7): unrelated predictions
    pushed through the Gram matrices as the score frame pushes G1."""
    rng = np.random.default_rng(7)
    R = np.stack([rng.standard_normal(shape) for _ in range(draws)])
    return GQ @ R @ GK


def gram_null95(GQ, GK, target, rows, cols, draws: int = 200, X=None) -> dict[str, float]:
    """95% quantile of |cos(G_Q R G_K, target)| for iid Gaussian R: how high an unrelated
    prediction scores once pushed through the Gram matrices (the score frame's null; all
    draws at once, the same draws as one at a time). X: `gram_draws` already made."""
    X = gram_draws(GQ, GK, target.shape, draws) if X is None else X
    draws = X.shape[0]
    out = {}
    for k, (rp, cp) in SUBBLOCKS.items():
        ri = [i for i, r in enumerate(rows) if rp(r)]
        ci = [j for j, c in enumerate(cols) if cp(c)]
        Xs = X[:, ri][:, :, ci].reshape(draws, -1)
        t = target[np.ix_(ri, ci)].ravel()
        nx, nt = np.linalg.norm(Xs, axis=1), np.linalg.norm(t)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.abs(Xs @ t) / (nx * nt)
        out[k] = float(np.nanquantile(cos, 0.95)) if np.isfinite(cos).any() else float("nan")
    return out


def first_zero_var_step(records: list[dict], snap_steps: list[int], level: float = 0.9):
    """The first snapshot at or after the first evaluation with 0var/ind >= level."""
    for r in records:
        if r.get("acc", {}).get("0var/ind", 0.0) >= level:
            later = [s for s in snap_steps if s >= r["step"]]
            return later[0] if later else None
    return None


def _load(path):
    from empirical.model import load_model

    model = load_model(path)
    model.eval()
    return model


# -- one snapshot ------------------------------------------------------------------------------


def closed_predictor(task, opts: Options, order: str | None = None):
    """(a, b) -> the closed-form G1 block (theory/), for the task's p, K, L."""
    order = opts.order if order is None else order

    def predict(a, b):
        return g1_block(a, b, task.p, task.K, task.L, order, opts.layout)

    predict.kind = "closed"
    return predict


def population_predictor(task, opts: Options, order: str | None = None, held_out=None):
    """(a, b) -> G1 of the theorem's model on opts.prediction_size sampled 1-var sequences of
    the comparison's distribution (opts.distribution in `order`, default opts.order; with
    'train' the run's restrictions and its held-out pairs `held_out`), a sample of its own
    (not the comparison batch)."""
    order = opts.order if order is None else order
    batch = one_var_batch(
        task, opts.prediction_size, opts.seed, order, opts.distribution, held_out,
        opts.all_assigned, stream="compare-qk/prediction",
    )  # fmt: skip
    pop = PopulationG1.from_batch(batch, task.p, task.K, task.L)

    def predict(a, b):
        return pop.block(a, b, layout=opts.layout)

    predict.kind = "population"
    predict.order, predict.distribution = order, opts.distribution
    return predict


def prediction_kind(task, opts: Options) -> str:
    """'closed' or 'population' for opts.prediction. 'auto': the closed form where it exists
    and describes the comparison's distribution (K <= 6 and --distribution unrestricted: the
    closed form knows no r1, r2 or held-out pairs), else the sampled population."""
    if opts.prediction not in PREDICTIONS:
        raise UsageError(f"--prediction must be one of {PREDICTIONS}, got {opts.prediction!r}")
    exists = closed_form_applies(task.K, task.L)
    if opts.prediction == "auto":
        return "closed" if exists and opts.distribution == "unrestricted" else "population"
    if opts.prediction == "closed" and not exists:
        raise UsageError(
            f"--prediction closed: the closed form assigns all K = {task.K} variables in "
            f"2K slots of the L - 4 = {task.L - 4} assignment positions, impossible here; use "
            "--prediction population (or auto)"
        )
    if opts.prediction == "closed" and opts.distribution != "unrestricted":
        raise UsageError(
            "--prediction closed: the closed form is G1 of the theorem's unrestricted "
            "population, not of the run's training distribution (the default --distribution "
            "train); add --distribution unrestricted, or use --prediction population (or auto)"
        )
    return opts.prediction


def make_predictor(task, opts: Options, order: str | None = None, held_out=None):
    """(a, b) -> G1 of the comparison's distribution (`prediction_kind`) in `order`."""
    if prediction_kind(task, opts) == "closed":
        predict = closed_predictor(task, opts, order)
        predict.order = opts.order if order is None else order
        predict.distribution = "unrestricted"
        return predict
    return population_predictor(task, opts, order, held_out)


def term_summary(M, rows, cols, L) -> dict:
    """The theorem's decomposition of a block (metrics.theorem_terms) without the blocks."""
    d = theorem_terms(M, rows, cols, L)
    return {k: v for k, v in d.items() if k not in ("terms", "rho")}


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
    if len(batch) >= 4:
        grads = split_gradients(w, l1.resid1, batch.labels, ("ce", "first_order"))
        g_ce, h1, h2 = grads["ce"]
        g_lin, lin_h1, lin_h2 = grads["first_order"]
        logits, pattern2 = grads["forward"]
    else:
        g_ce, h1, h2 = gradients(w, l1.resid1, batch.labels, "ce"), None, None
        g_lin = gradients(w, l1.resid1, batch.labels, "first_order")
        logits, pattern2 = layer2(w, l1.resid1)
    att = layer2_attention(pattern2, batch, p, K)
    a = att[f"a_{opts.ab_from}"]
    b = att[f"b_{opts.ab_from}"]
    out: dict = {
        "batch_accuracy": float((logits.argmax(-1) == batch.labels).double().mean()),
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

    out["loss_ce"], out["loss_lin"] = g_ce.loss, g_lin.loss
    W = theorem_w(model)
    mats = {
        "grad_ce": -g_ce.G_QK,
        "grad_lin": -g_lin.G_QK,
        "sgd_factored": g_ce.factored_change(w),
    }
    if next_model is not None:
        D = theorem_w(next_model) - W
        mats["diff"] = D
        c = 1.0 if decay is None else float(decay)
        a1, a2 = model.blocks[1].attn, next_model.blocks[1].attn
        f64 = [t.W_Q[0].detach().double() for t in (a1, a2)]
        k64 = [t.W_K[0].detach().double() for t in (a1, a2)]
        mats["diff_nodecay"] = undecayed_update(f64[0], k64[0], f64[1], k64[1], c)
        mats["diff_perp"] = D - (D * W).sum() / (W * W).sum() * W
        out["decay"] = {
            "factor_per_factor": c,
            # the merged matrix's decay (c^2 - 1) against the update's component along W
            "merged_decay_fraction_of_W": c * c - 1.0,
            "update_along_W_fraction": float((D * W).sum() / (W * W).sum()),
        }
    att_kind = getattr(predict, "order", opts.order)
    att_entries = attenuation_entries(rows, cols, L, att_kind)
    read = {"weights": fr.readings(W)}
    for vname, M in mats.items():
        read[vname] = fr.readings(M)
    for reading, S in read["weights"].items():
        blocks[f"{reading}/weights"] = S
    for vname in mats:
        for reading, S in read[vname].items():
            blocks[f"{reading}/{vname}"] = S
    n_all = len(rows) * len(cols)
    signs = sign_flips(n_all, opts.null_draws) if valid else None
    GQ, GK = raw.gram()
    gdraws = gram_draws(GQ, GK, pred.shape) if valid else None
    comp: dict = {}
    for f in FRAMES:
        S_w = read["weights"][READ[f]]
        comp[f] = {"weights_identity": identity_score(barv_block(S_w, rows, cols))}
        for vname in mats:
            obs = read[vname][READ[f]]
            entry = {
                "cos": subblock_cosines(preds[f], obs, rows, cols),
                "identity": identity_score(barv_block(obs, rows, cols)),
                "attenuation": sign_agreement(preds[f], obs, rows, cols, att_entries),
                "norm": float(np.linalg.norm(obs)),
                "max_abs": float(np.abs(obs).max()),
                "null95_signs": {
                    sub: sign_null95(
                        subblock(preds[f], rows, cols, sub), subblock(obs, rows, cols, sub), signs
                    )
                    if valid
                    else float("nan")
                    for sub in NULL_SUBS
                },
            }
            if f == "score" and valid:
                entry["null95_gram"] = gram_null95(GQ, GK, obs, rows, cols, X=gdraws)
            comp[f][vname] = entry
    out["comparison"] = comp
    out["pred_identity"] = identity_score(barv_block(pred, rows, cols))
    # the theorem's terms (assignment-wide, memory, attenuation) in the prediction and each
    # observed matrix, read in the headline frame; the state by its scores between the
    # labelled vectors (raw: the attention it produces, what the paper's remark on the
    # all-assignment term is about), and also in the headline frame ('weights_frame')
    terms = {"pred": term_summary(preds[frame], rows, cols, L) if valid else None}
    terms["weights"] = term_summary(read["weights"]["raw"], rows, cols, L)
    terms["weights_frame"] = term_summary(read["weights"][READ[frame]], rows, cols, L)
    for vname in mats:
        terms[vname] = term_summary(read[vname][READ[frame]], rows, cols, L)
    out["terms"] = terms
    # noise floor: each gradient of two halves of the batch, in the headline frame
    if h1 is not None:
        r = READ[frame]
        out["split_half_cos_grad_ce"] = subblock_cosines(
            fr.read(-h1.G_QK, r), fr.read(-h2.G_QK, r), rows, cols
        )
        out["split_half_cos_grad_lin"] = subblock_cosines(
            fr.read(-lin_h1.G_QK, r), fr.read(-lin_h2.G_QK, r), rows, cols
        )
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


# -- the one-step experiment ------------------------------------------------------------------


def with_interval(correct: int, n: int) -> dict:
    """{"acc", "n", "correct", "ci95"}: Wilson 95% interval (empirical.stats)."""
    from empirical.stats import accuracy_interval

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


def one_step_experiment(
    model, task, batch, sets: dict, opts: Options, order: str, predict=None
) -> dict:
    """Steps on layer-2 W_Q, W_K from `model` on the 1-var sequences `batch` (operand order
    `order`, which the prediction uses too), and the accuracies they give on every set of
    `sets` (the first opts.eval_size sequences of each; Wilson 95% intervals in
    "intervals"). predict: (a, b) -> the G1 block (default: the closed form, `order`).

    families:
      sgd            plain SGD on W_Q, W_K (cross-entropy on `batch`), lr in opts.one_step_lrs,
                     opts.one_step_steps full-batch steps
      grad_merged    W_QK -= eta dL/dW_QK (the theorem's step on the merged matrix)
      predicted_grad W_QK += Q^T G1 K / scale: a gradient step of a network whose
                     label-space gradient is G1 (exact in the dual frame)
      predicted_orth W_QK += the theory's G1 block lifted from the orth frame,
                     dW = scale * Q~^T G1 K~ (well conditioned)
      predicted_raw  the same lifted from the raw frame by least squares (pseudo-inverse):
                     the labelled scores change by G1 (the theorem's W^1 = W^0 + eta G1)
      random_orth    a random Gaussian block lifted like predicted_orth (control)
    Every step except sgd is sized by t = the RMS change of the layer-2 scores of `=` over
    the sequences of `batch` (score units, what the step does to real inputs); sgd rows
    report the same RMS for each lr (`rms_dscore`).
    """
    import copy

    p, K, L = task.p, task.K, task.L
    names = list(sets)
    if opts.eval_size:
        sets = {n: sets[n].slice(0, opts.eval_size) for n in names}
    two = sets.get("2var/ind")
    w0 = Weights.of(model)
    raw = coordinates(model, p, K, L)
    orth = raw.orthonormalized()
    fr = Frames(raw)
    frame = check_frame(opts.frame)
    l1b = layer1(w0, batch.tokens)
    _, pattern2 = layer2(w0, l1b.resid1)
    att = layer2_attention(pattern2, batch, p, K)
    a, b = att[f"a_{opts.ab_from}"], att[f"b_{opts.ab_from}"]
    pred = predict(a, b) if predict is not None else g1_block(a, b, p, K, L, order, opts.layout)
    pred_f = fr.predicted(pred, frame)
    two_sub = two.slice(0, 2048) if two is not None else None
    # layer 1 is not changed by any step: its residuals are computed once
    two_resid = layer1(w0, two_sub.tokens).resid1 if two_sub is not None else None

    def measures(m) -> dict:
        """What a stepped model gives on the batch; its set accuracies come later, for every
        stepped model at once (`_correct_each`: layer 1 is computed once per set)."""
        w = Weights.of(m)
        res: dict = {"_weights": w}
        logits, _ = layer2(w, l1b.resid1)
        res["batch_loss"] = float(torch.nn.functional.cross_entropy(logits, batch.labels))
        if two_sub is not None:
            res["2var_value_attention"] = _value_attention(w, two_resid, two_sub)
        S_raw, S_orth = raw.project(theorem_w(m)), orth.project(theorem_w(m))
        res["raw_identity"] = identity_score(barv_block(S_raw, raw.rows, raw.cols))
        res["orth_identity"] = identity_score(barv_block(S_orth, raw.rows, raw.cols))
        return res

    W0 = theorem_w(model)
    S0_raw, S0_orth = raw.project(W0), orth.project(W0)

    last = l1b.resid1[:, -1]

    def rms_dscore(D) -> float:
        """RMS over the batch's sequences and positions of the change of `=`'s layer-2
        scores when W_QK changes by D."""
        d = torch.einsum("bd,bld->bl", last @ D.to(last.dtype), l1b.resid1) / w0.scale
        return float(d.pow(2).mean().sqrt())

    def moved(m) -> dict:
        W = theorem_w(m)
        return {
            "rms_dscore": rms_dscore(W - W0),
            "max_abs_dS_raw": float(np.abs(raw.project(W) - S0_raw).max()),
            "max_abs_dS_orth": float(np.abs(orth.project(W) - S0_orth).max()),
            # how much of the step is G1's direction: in the headline frame (against G1 as
            # that frame sees it) and, legacy, the orth frame against G1 itself
            "cos_dS_G1": cosine(fr.read(W - W0, READ[frame]), pred_f),
            "cos_dS_orth_G1": cosine(orth.project(W) - S0_orth, pred),
        }

    def with_qk(W):
        from empirical.compare_qk.coords import set_qk

        m = copy.deepcopy(model)
        set_qk(m, W)
        return m

    out = {
        "before": measures(model), "a": a, "b": b, "order": order, "families": {},
        "set_sizes": {n: len(sets[n]) for n in names},
        "prediction": getattr(predict, "kind", "closed"),
        "prediction_distribution": getattr(predict, "distribution", "unrestricted"),
        "frame": frame,
    }  # fmt: skip
    # what ideal routing would give (no key-query update can do better downstream)
    out["oracle_routing_accuracy"] = {
        n: oracle_routing_accuracy(w0, layer1(w0, sets[n].tokens[:2048]).resid1, sets[n][:2048])
        for n in names
    }
    # plain SGD on W_Q, W_K (layer 1 unchanged: the batch's residuals stay l1b's)
    g0 = gradients(w0, l1b.resid1, batch.labels, "ce")
    rows = []
    for lr in opts.one_step_lrs:
        m = copy.deepcopy(model)
        for k in range(opts.one_step_steps):
            g = g0 if k == 0 else gradients(Weights.of(m), l1b.resid1, batch.labels, "ce")
            attn = m.blocks[1].attn
            with torch.no_grad():
                attn.W_Q[0].sub_(lr * g.G_Q.to(attn.W_Q.dtype))
                attn.W_K[0].sub_(lr * g.G_K.to(attn.W_K.dtype))
        rows.append({"lr": lr, **moved(m), **measures(m)})
    out["families"]["sgd"] = rows
    # the other steps: a direction D, scaled so that rms_dscore(t D) = t
    G = g0.G_QK
    rng = np.random.default_rng(opts.seed + 1)
    R = rng.standard_normal(pred.shape)
    directions = {
        "grad_merged": -G,
        "predicted_grad": raw.gradient_of(pred),
        "predicted_orth": orth.lift(pred),
        "predicted_raw": raw.lift(pred),
        "random_orth": orth.lift(R),
    }
    for fam, D in directions.items():
        D = D / rms_dscore(D)
        rows = []
        for t in opts.score_steps:
            m = with_qk(W0 + t * D)
            rows.append({"t": t, **moved(m), **measures(m)})
        out["families"][fam] = rows
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
    residuals of each chunk of each set are computed once (`observe.layer1`) and each model's
    layer 2 (`observe.layer2`, in `dtype`: the model's own) reads them, instead of one full
    forward per model and set."""
    counts: list[dict] = [dict.fromkeys(sets, 0) for _ in ws]
    ws = [w.to(dtype) for w in ws]
    for name, batch in sets.items():
        for i in range(0, len(batch), chunk):
            resid1 = layer1(w0, batch.tokens[i : i + chunk]).resid1.to(dtype)
            labels = batch.labels[i : i + chunk]
            for c, w in zip(counts, ws, strict=True):
                c[name] += int((layer2(w, resid1)[0].argmax(-1) == labels).sum())
    return counts


# -- over a run -------------------------------------------------------------------------------


def _metrics_at(records, step):
    for r in records:
        if r["step"] == step:
            return r.get("acc", {})
    return {}


def one_step_default(records, phases, snap_steps) -> tuple[int | None, str]:
    """(step, rule) of the one-step test by default: the last snapshot before the first
    spike's jump (the model has learned 0-var addition, the routing is still missing: the
    theorem's starting point), else the first snapshot with 0var/ind >= 0.9."""
    spike = (phases or {}).get("first_spike")
    if spike:
        jump = spike.get("jump_start_step", spike["start_step"])
        before = [s for s in snap_steps if s <= jump]
        if before:
            return before[-1], f"last snapshot at or before the first spike's jump ({jump})"
    return first_zero_var_step(records, snap_steps), "first snapshot with 0var/ind >= 0.9"


def compare_run(run_dir, opts: Options | None = None, done: dict | None = None) -> dict:
    """Every number of the comparison for the run in `run_dir` (see the module docstring).
    `done`: snapshot analyses made ahead (`empirical.compare_qk.follow`), used where their
    files are still the ones found here."""
    from empirical.compare_qk.follow import SnapshotInputs, snapshot_key
    from empirical.compare_qk.windows import default_windows, window_summary
    from empirical.task import held_out_pairs
    from empirical.train.phases import detect_phases

    opts = opts or Options()
    run = RunDir(run_dir).require_run()
    cfg = run.read_two_layer_config("compare-qk")
    task = cfg.task
    snaps = run.snapshots()
    if not snaps:
        raise RunDirError(f"{run}: no snapshots (train with train.snapshot_every > 0)")
    snap_steps = [s for s, _ in snaps]
    by_step = dict(snaps)
    if opts.steps is not None:
        missing = [s for s in opts.steps if s not in by_step]
        if missing:
            raise UsageError(f"--steps: no snapshot at steps {missing}; available: {snap_steps}")
        chosen = sorted(set(opts.steps))
    else:
        chosen = snap_steps
    chosen = chosen[:: max(opts.every, 1)]
    if opts.one_step and opts.one_step_at is not None and opts.one_step_at not in by_step:
        raise UsageError(
            f"--one-step-at {opts.one_step_at}: no snapshot there; available {snap_steps}"
        )
    if opts.all_assigned and not closed_form_applies(task.K, task.L):
        raise UsageError(
            f"--all-assigned: K = {task.K} variables do not fit in the {task.L - 4} assignment "
            "positions"
        )
    kind = prediction_kind(task, opts)  # a bad --prediction fails before the work
    if opts.frame not in FRAMES:
        raise UsageError(f"--frame must be one of {FRAMES}, got {opts.frame!r}")
    records = run.read_metrics()
    saved_sets = run.read_eval_sets(cfg) if opts.one_step else None  # checked before the work
    phases = detect_phases(records).to_dict() if records else None
    inputs = SnapshotInputs.of(run.path, opts, cfg=cfg)  # the config read once
    held = inputs.held
    t0 = time.time()
    result = {
        "run_dir": str(run.path),
        "task": {"p": task.p, "K": task.K, "L": task.L},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "progress"},
        "prediction": kind,
        "frame": opts.frame,
        "phases": phases,
        "snapshot_steps": snap_steps,
        "labels": None,
        "steps": [],
    }
    all_blocks: dict[str, list] = {}
    cached_step, cached = None, None  # the last snapshot's next: read each file once
    done = done or {}
    for i, step in enumerate(chosen):
        later = [s for s in snap_steps if s > step]
        next_step = later[0] if later else None
        key = snapshot_key(step, by_step[step], next_step, by_step.get(next_step))
        model = None
        if key in done:  # analysed ahead, from these very files
            scal, blocks = done[key]
            scal = dict(scal)
        else:
            model = cached if cached_step == step else _load(by_step[step])
            nxt = _load(by_step[next_step]) if later else None
            cached_step, cached = (next_step, nxt) if later else (None, None)
            scal, blocks = inputs.analyse(step, model, next_step, nxt)
        scal["step"] = step
        scal["next_step"] = later[0] if later else None
        scal["metrics_acc"] = _metrics_at(records, step)
        result["steps"].append(scal)
        for k, v in blocks.items():
            all_blocks.setdefault(k, []).append((step, v))
        if result["labels"] is None:
            model = _load(by_step[step]) if model is None else model
            raw = coordinates(model, task.p, task.K, task.L)
            result["labels"] = {"rows": raw.rows, "cols": raw.cols}
        if opts.progress:
            c = scal["comparison"][opts.frame]["grad_ce"]["cos"]
            print(
                f"[compare-qk] step {step:6d} ({i + 1}/{len(chosen)}, {time.time() - t0:5.0f}s) "
                f"a={scal['a']:.3f} cos({opts.frame} grad_ce): all {c['all']:+.3f} "
                f"bar_v {c['barv_barv']:+.3f}",
                flush=True,
            )
    cached = None
    wins = opts.windows if opts.windows is not None else default_windows(phases, chosen)
    result["windows_source"] = "options" if opts.windows is not None else "phases"
    result["windows"] = window_summary(result["steps"], wins, opts.frame)
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    result["null95"] = {
        k: null_cos95(subblock(np.zeros((len(rows), len(cols))), rows, cols, k).size)
        for k in SUBBLOCKS
    }
    result["_blocks"] = all_blocks
    if opts.one_step:
        at, rule = opts.one_step_at, "--one-step-at"
        if at is None:
            at, rule = one_step_default(records, phases, snap_steps)
        if at is None:
            result["one_step"] = {"skipped": "no snapshot with 0var/ind >= 0.9 (use --one-step-at)"}
        else:
            if at not in by_step:
                raise UsageError(f"--one-step-at {at}: no snapshot there; available {snap_steps}")
            sets = saved_sets  # checked to be this run's above (None: absent)
            if sets is None:
                from empirical.task import build_eval_sets

                sets = build_eval_sets(task, cfg.seed)
            t1 = time.time()
            held_os = (
                held_out_pairs(task, cfg.seed) if opts.one_step_distribution == "train" else None
            )
            batch_os = one_var_batch(
                task, opts.batch_size, opts.seed, opts.one_step_order, opts.one_step_distribution,
                held_os, opts.all_assigned,
            )  # fmt: skip
            # G1 of the comparison's distribution (default: the run's own) in the one-step
            # data's operand order
            pred_os = make_predictor(task, opts, opts.one_step_order, held_out=held)
            res = one_step_experiment(
                _load(by_step[at]), task, batch_os, sets, opts, opts.one_step_order, pred_os
            )
            res["step"] = at
            res["rule"] = rule
            res["metrics_acc"] = _metrics_at(records, at)
            res["elapsed_one_step_s"] = time.time() - t1
            result["one_step"] = res
            if opts.progress:
                print(
                    f"[compare-qk] one-step test at step {at}: {time.time() - t1:.0f}s", flush=True
                )
    result["elapsed_s"] = time.time() - t0
    return result


def jsonable(obj):
    """Plain JSON types; NaN / inf -> None; numpy -> lists and floats."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
