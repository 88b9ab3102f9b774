"""compare-qk for a chain run (docs/compare_qk.md, "Deeper models (chain runs)"): the last and
middle hops' key-query updates over every snapshot window against the two-hop theory
(`qk_theory`: W3's vs G1^(3), W2's vs D; cosines with isotropic and sign-randomised nulls),
and the order in which the hops form (attention, memory contrast, the middle gradient).

    result = compare_chain_run("runs/chain/seed0")   # every number, JSON-ready
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from empirical.bridge.compare_qk.coords import theorem_w
from empirical.bridge.compare_qk.frames import READ, Frames
from empirical.bridge.compare_qk.metrics import (
    barv_block,
    cosine,
    null_cos95,
    sign_null95,
    subblock,
)
from empirical.bridge.compare_qk.updates import decay_factor, undecayed_update
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir
from empirical.studies.chain.analysis.attention import chain_attention, formation_steps, key_series
from empirical.studies.chain.analysis.qk_coords import chain_chunk, hop_blocks, layer_coordinates
from empirical.studies.chain.analysis.qk_theory import beta_of, chain_prediction
from empirical.studies.chain.options import ChainCompareConfig
from empirical.task.eval_sets import load_eval_sets

HOPS = ("last", "middle")
SUBS = ("all", "barv_barv", "barv_v")  # the whole block; the memory; ebar x variable token


def contrast(B: np.ndarray) -> float:
    """mean diagonal - mean off-diagonal of a square block (the memory's strength)."""
    K = B.shape[0]
    off = (B.sum() - np.trace(B)) / (K * K - K)
    return float(np.trace(B) / K - off)


def operand_attention(model, block: int, tokens: torch.Tensor) -> float:
    """The `=` query's mean weight per operand position in `block`."""
    name = f"blocks.{block}.attn.hook_pattern"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == name)
    pat = cache[name][:, 0, -1]  # [n, key]
    L = tokens.shape[1]
    return float(pat[:, L - 3 : L - 1].mean())


def query_gradient(model, block: int, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """dL/dW_QK of `block` through the `=` query's scores only, [d, d] float64: with x the
    residual stream into the block and dS the loss gradient of the query's scores,
    sum_n x_n[L-1]^T dS_n x_n / scale (cross-entropy at `=`, mean over the sequences)."""
    m = model.double() if next(model.parameters()).dtype != torch.float64 else model
    store: dict = {}

    def keep_resid(_mod, _inp, out):
        store["x"] = out

    def keep_scores(_mod, _inp, out):
        out.retain_grad()
        store["s"] = out

    h1 = m.blocks[block].hook_resid_pre.register_forward_hook(keep_resid)
    h2 = m.blocks[block].attn.hook_attn_scores.register_forward_hook(keep_scores)
    try:
        logits = m(tokens)[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, labels.long())
        loss.backward()
    finally:
        h1.remove()
        h2.remove()
    x = store["x"].detach()
    dS = store["s"].grad[:, 0, -1]  # [n, key]
    m.zero_grad(set_to_none=True)
    return torch.einsum("nd,nk,nke->de", x[:, -1], dS, x) / float(m.cfg.attn_scale)


def _attention_names(series: dict, n_layers: int) -> dict[str, str]:
    last = next(k for k in series if k.startswith(f"layer {n_layers}: query -> the number"))
    return {"last": last, "middle": f"layer {n_layers - 1}: query -> hop 1"}


def _cos_entry(pred, obs, rows, cols, sub) -> dict:
    x, y = subblock(pred, rows, cols, sub), subblock(obs, rows, cols, sub)
    return {
        "cos": cosine(x, y),
        "null_iso95": null_cos95(x.size),
        "null_sign95": sign_null95(x, y),
        "entries": int(x.size),
    }


def _snapshot(model, vocab, blocks, all_tokens, all_labels, step) -> tuple[dict, dict]:
    """One snapshot's record (operand attention, memory contrast and the QK gradients per
    hop) and its state for the windows (coordinates, frames, W_Q, W_K per hop)."""
    rec: dict = {"step": step}
    st: dict = {}
    for hop in HOPS:
        b = blocks[hop]
        coords = layer_coordinates(model, vocab, b["block"], b["query_ov"])
        W = theorem_w(model, b["block"])
        att = model.blocks[b["block"]].attn
        raw = coords.project(W)
        a = operand_attention(model, b["block"], all_tokens)
        rec[hop] = {
            "operand_attention": a,
            "memory_contrast": contrast(barv_block(raw, coords.rows, coords.cols)),
        }
        st[hop] = {
            "coords": coords,
            "frames": Frames(coords),
            "WQ": att.W_Q[0].detach().double().clone(),
            "WK": att.W_K[0].detach().double().clone(),
            "a": a,
        }
    g = query_gradient(model, blocks["middle"]["block"], all_tokens, all_labels).detach()
    gl = st["middle"]["frames"].read(g, "dual")
    co = st["middle"]["coords"]
    g3 = query_gradient(model, blocks["last"]["block"], all_tokens, all_labels).detach()
    last_norm = float(np.linalg.norm(st["last"]["frames"].read(g3, "dual")))
    rec["last_gradient"] = {"all": last_norm, "param": float(g3.norm())}
    rec["middle_gradient"] = {
        "all": float(np.linalg.norm(gl)),
        "barv_barv": float(np.linalg.norm(subblock(gl, co.rows, co.cols, "barv_barv"))),
        "param": float(g.norm()),
        "relative": float(np.linalg.norm(gl)) / last_norm if last_norm > 0 else float("nan"),
    }
    st["middle"]["grad_label"] = gl
    return rec, st


def compare_chain_run(run_dir, config: ChainCompareConfig | None = None) -> dict:
    """Every number of the comparison for the run in `run_dir` (`config`: its options; a
    command's ChainCompareQKOptions too, of which the comparison's fields are recorded)."""
    cfg = config or ChainCompareConfig()
    run = RunDir(run_dir).require_run()
    run_cfg = run.read_config()
    steps = run.snapshot_steps()
    sets = load_eval_sets(run.eval_sets)
    missing = [s for s in (*cfg.sets, cfg.attention_set) if s not in sets]
    if missing:
        raise ValueError(f"sets {missing} not in the run's sets ({', '.join(sets)})")
    model, vocab = load_run(run.path, step=steps[0])
    n_layers = model.cfg.n_layers
    blocks = hop_blocks(n_layers)
    tokens = [sets[s].tokens[: cfg.n] for s in cfg.sets]
    labels = [sets[s].labels[: cfg.n] for s in cfg.sets]
    chunks = [
        chain_chunk(t, y, vocab, 1.0 / len(cfg.sets)) for t, y in zip(tokens, labels, strict=True)
    ]
    all_tokens, all_labels = torch.cat(tokens), torch.cat(labels)
    att_tokens = sets[cfg.attention_set].tokens[: cfg.n]
    p, K, L = vocab.p, vocab.K, vocab.L

    snaps, tables, windows, prev = [], [], [], None
    for step in steps:
        model, vocab = load_run(run.path, step=step)
        model = model.double()
        rec, st = _snapshot(model, vocab, blocks, all_tokens, all_labels, step)
        tables.append(chain_attention(model, vocab, att_tokens))
        snaps.append(rec)
        if prev is not None:
            windows.append(_window(prev[1], st, prev[0], step, run_cfg, chunks, p, K, L, cfg.frame))
        prev = (step, st)

    series = key_series({"steps": steps, "tables": tables})
    formed_att = formation_steps(steps, series, cfg.fraction)
    names = _attention_names(series, n_layers)
    mem_series = {hop: [s[hop]["memory_contrast"] for s in snaps] for hop in HOPS}
    formed_mem = formation_steps(steps, mem_series, cfg.fraction)
    formation = {
        "attention": {hop: attention_formed(formed_att[names[hop]], names[hop], L) for hop in HOPS},
        "memory": {hop: formed_mem[hop] for hop in HOPS},
    }
    order = order_test(snaps, formation)
    spike = spike_window(windows, formation["attention"]["last"]["step"])
    return {
        "run": str(run.path),
        "label": run.label(),
        "config": {f.name: getattr(cfg, f.name) for f in dataclasses.fields(ChainCompareConfig)},
        "n_layers": n_layers,
        "blocks": blocks,
        "p": p,
        "K": K,
        "L": L,
        "steps": steps,
        "snapshots": snaps,
        "windows": windows,
        "attention_series": series,
        "formation": formation,
        "order": order,
        "spike": spike,
        "maxima": maxima(windows),
    }


def _window(st0, st1, s0, s1, run_cfg, chunks, p, K, L, frame):
    c = decay_factor(run_cfg.train, s0, s1)
    betas = {hop: beta_of(min(max(st0[hop]["a"], 1e-6), 0.5 - 1e-6), L) for hop in HOPS}
    pred = chain_prediction(chunks, p, K, L, betas["middle"], betas["last"])
    out: dict = {
        "start": s0,
        "end": s1,
        "decay_factor": c,
        "beta": betas,
        "G2_norm_at_W0": pred.G2_norm,
    }
    for hop, G in (("last", pred.G3), ("middle", pred.D)):
        a, b = st0[hop], st1[hop]
        dW = undecayed_update(a["WQ"], a["WK"], b["WQ"], b["WK"], c)
        obs = a["frames"].read(dW, READ[frame])
        prd = a["frames"].predicted(G, frame)
        rows, cols = a["coords"].rows, a["coords"].cols
        out[hop] = {
            "prediction": "G1^(3)" if hop == "last" else "D (W2 drive after one W3 step)",
            "update_norm": float(np.linalg.norm(obs)),
            "update_memory_norm": float(np.linalg.norm(subblock(obs, rows, cols, "barv_barv"))),
            "cos": {sub: _cos_entry(prd, obs, rows, cols, sub) for sub in SUBS},
        }
    gl = st0["middle"]["grad_label"]
    co = st0["middle"]["coords"]
    prd = st0["middle"]["frames"].predicted(pred.D, frame)
    out["middle_gradient_vs_D"] = {
        sub: _cos_entry(prd, -gl, co.rows, co.cols, sub) for sub in ("all", "barv_barv")
    }
    return out


def attention_formed(formed: dict, measure: str, L: int) -> dict:
    """A formation step of `chain_attention.formation_steps` that counts only if the measure
    peaks at >= 2/L, twice the weight of a query with no preference (a half rise of a measure
    that stays near 1/L is noise): otherwise step None, with the reason."""
    out = {"measure": measure, **formed, "floor": 2.0 / L}
    if formed["peak"] is not None and formed["peak"] < 2.0 / L and formed["step"] is not None:
        out["step"] = None
        out["note"] = f"peak {formed['peak']:.3f} < 2/L = {2.0 / L:.3f}: no preference formed"
    return out


def spike_window(windows: list[dict], last_step: int | None) -> dict | None:
    """The window that ends at the last hop's formation step (its attention's half rise): the
    last hop's spike at the snapshots' resolution; None if it never forms or forms at the
    first snapshot."""
    for w in windows:
        if last_step is not None and w["end"] == last_step:
            return {
                "start": w["start"],
                "end": w["end"],
                "chosen_from": 1,
                "rule": "the window ending at the last hop's attention formation step",
            }
    return None


def maxima(windows: list[dict]) -> dict:
    """Per hop and sub-block, the largest cosine over the windows with its window's null
    levels, how many windows it was chosen from (a maximum over many windows is biased up:
    compare it with the nulls knowing that), and in how many windows the cosine is above its
    sign-randomised null (about 5% of them by chance)."""
    out: dict = {}
    for hop in HOPS:
        out[hop] = {}
        for sub in SUBS:
            vals = [w for w in windows if not math.isnan(w[hop]["cos"][sub]["cos"])]
            if not vals:
                out[hop][sub] = None
                continue
            best = max(vals, key=lambda w: w[hop]["cos"][sub]["cos"])
            above = sum(w[hop]["cos"][sub]["cos"] > w[hop]["cos"][sub]["null_sign95"] for w in vals)
            out[hop][sub] = {
                **best[hop]["cos"][sub],
                "start": best["start"],
                "end": best["end"],
                "chosen_from": len(vals),
                "windows_above_sign_null": int(above),
            }
    return out


def order_test(snaps: list[dict], formation: dict) -> dict:
    """The theory's order: the last hop forms before the middle hop, and the middle layer's
    gradient is small until the last hop's memory forms. Measured: the formation steps
    (attention and memory level) and the middle layer's gradient norm (dual frame, whole
    block and bar_v x bar_v) averaged over the snapshots before the last hop's attention
    formation step and over those from it to the middle hop's; 'relative' is the middle
    layer's norm over the last layer's (the same gradient at `=`, each in its own dual
    frame), which takes out the overall scale of the loss gradient (tiny at initialisation)."""
    att = formation["attention"]
    last, mid = att["last"]["step"], att["middle"]["step"]
    grad: dict = {}
    for sub in ("all", "barv_barv", "relative"):
        before = [s["middle_gradient"][sub] for s in snaps if last is not None and s["step"] < last]
        after = [
            s["middle_gradient"][sub]
            for s in snaps
            if last is not None and last <= s["step"] <= (mid if mid is not None else last)
        ]
        mb = float(np.mean(before)) if before else None
        ma = float(np.mean(after)) if after else None
        grad[sub] = {
            "before": mb,
            "after": ma,
            "n_before": len(before),
            "n_after": len(after),
            "ratio": (ma / mb) if mb and ma is not None else None,
        }
    mem = formation["memory"]
    ml, mm = mem["last"]["step"], mem["middle"]["step"]
    return {
        "last_hop_step": last,
        "middle_hop_step": mid,
        "verdict": _verdict(last, mid, "not measurable (a hop never forms)"),
        "memory_last_step": ml,
        "memory_middle_step": mm,
        "memory_verdict": _verdict(ml, mm, "not measurable"),
        "middle_gradient": grad,
    }


def _verdict(last: int | None, middle: int | None, unknown: str) -> str:
    """Whether the last hop forms before the middle one (`unknown` if either never does)."""
    if last is None or middle is None:
        return unknown
    if last < middle:
        return "confirmed"
    return "not resolved (same snapshot)" if last == middle else "refuted"
