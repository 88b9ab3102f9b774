"""A comparison's summary.md: the training windows' tables, a row per snapshot, the one-step
table (`summary_markdown`; `outputs.report` declares it beside the JSON and figures)."""

from __future__ import annotations

import numpy as np

from empirical.bridge.compare_qk.frames import DESCRIPTION


def _f(x, nd=3):
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}f}"


def _stat(st, nd=2) -> str:
    """'mean [min, max]' of a windows.stat (n/a when empty; the mean alone for one value)."""
    if not st or st.get("n", 0) == 0:
        return "n/a"
    if st["n"] == 1:
        return _f(st["mean"], nd)
    return f"{_f(st['mean'], nd)} [{_f(st['min'], nd)}, {_f(st['max'], nd)}]"


VARIANT_NAMES = {
    "grad_ce": "-gradient, cross-entropy (1-var data)",
    "grad_lin": "-gradient, first-order term (1-var data)",
    "sgd_factored": "SGD on W_Q, W_K (induced change of W_QK)",
    "diff": "observed update W_QK(next) - W_QK",
    "diff_nodecay": "observed update, weight decay removed (lr x wd per step and factor)",
    "diff_perp": "observed update minus its whole component along W_QK (legacy 'w/o decay')",
}
TERM_NAMES = {
    "pred": "G1 at the measured a, b",
    "weights": "current W_QK (state), its scores (raw)",
    "weights_frame": "current W_QK (state), headline frame",
    "grad_ce": "-gradient (cross-entropy)",
    "grad_lin": "-gradient (first order)",
    "diff": "observed update",
    "diff_nodecay": "observed update (decay removed)",
}


def frames_of(result) -> list[str]:
    steps = result.get("steps") or [{}]
    return list(steps[0].get("comparison", {})) or [result.get("frame", "dual")]


def window_tables(result: dict) -> list[str]:
    """A table per training window: cos(G1, ...) mean [min, max] over its snapshots or
    updates in the headline frame and the others, the null levels, the update's score-change
    attribution, the all-assignment term's share, and the assumptions."""
    win = result.get("windows") or {}
    if not win:
        return []
    n95 = result["null95"]
    frame = result.get("frame", "orth")
    others = [f for f in frames_of(result) if f != frame]
    lines = [
        "",
        "## Training windows ("
        + ("given by --windows" if result.get("windows_source") == "options" else "from the phases")
        + ")",
        "",
        f"Each cell: mean [min, max] over the window's snapshots (gradients, state) or its "
        f"snapshot-to-snapshot updates; n = how many values the max was chosen from. Headline "
        f"frame: {frame} ({DESCRIPTION.get(frame, '')}). Null levels: isotropic (95% of "
        f"random directions) whole block {_f(n95['all'])}, bar_v block "
        f"{_f(n95['barv_barv'])}; sign-randomised (95% of |cos| with G1's and the "
        "observation's magnitudes, random signs) per comparison, in its column. A window "
        "lo:hi holds the snapshots lo <= step <= hi and the updates that start and end "
        "inside it.",
    ]
    for name, e in win.items():
        lines += window_table(name, e, frame, others)
    return lines


def window_table(name: str, e: dict, frame: str, others: list[str]) -> list[str]:
    """One window's tables (`windows.window_summary`'s entry `e`): the cosines in the
    headline frame and the `others`, the score-change split, the all-assignment share and
    the quantities measured at its snapshots."""
    ups = e["updates"]
    lines = [
        "",
        f"### {name}: steps {e['lo']}-{e['hi']} ({len(e['snapshots'])} snapshots, "
        f"{len(ups)} updates"
        + (f": {', '.join(f'{a}->{b}' for a, b in ups[:6])}{', ...' if len(ups) > 6 else ''}"
           if ups else "")
        + ")",
        "",
        f"| cos(G1, .), {frame} frame | n | whole block | bar_v block | sign null whole / "
        "bar_v | " + " | ".join(f"whole / bar_v ({f})" for f in others)
        + " | bar_v rows with argmax on the diagonal | attenuation signs as G1 |",
        "|---" * (6 + len(others)) + "|",
    ]  # fmt: skip
    for var, label in VARIANT_NAMES.items():
        c = e["cos"][frame][var]
        nl = e["null95_signs"][var]
        cells = " | ".join(
            f"{_stat(e['cos'][f][var]['all'])} / {_stat(e['cos'][f][var]['barv_barv'])}"
            for f in others
        )
        lines.append(
            f"| {label} | {c['all']['n']} | {_stat(c['all'])} | {_stat(c['barv_barv'])} | "
            f"{_stat(nl['all'])} / {_stat(nl['barv_barv'])} | {cells} | "
            f"{_stat(e['identity_rows'][var])} | {_stat(e['attenuation_sign'][var])} |"
        )
    sc, sh = e.get("score_change"), e.get("score_change_share")
    if sc and sc["all"]["total"]["n"]:
        lines += [
            "",
            "| labelled score change of the updates (raw frame) | |total| | W_QK part | "
            "vectors part | cross | share of total: W_QK / vectors / cross |",
            "|---|---|---|---|---|---|",
        ]
        for sub, label in (("all", "whole block"), ("barv_barv", "bar_v block")):
            parts = " | ".join(_stat(sc[sub][k]) for k in ("total", "w_qk", "vectors", "cross"))
            shares = " / ".join(_stat(sh[sub][k]) for k in ("w_qk", "vectors", "cross"))
            lines.append(f"| {label} | {parts} | {shares} |")
    lines += [
        "",
        f"| all-assignment share ({frame} frame; the state also by its scores): "
        "assignment-wide / (assignment-wide + memory) energy | mean [min, max] |",
        "|---|---|",
    ]
    for blk, label in TERM_NAMES.items():
        if blk in e["aw_share"]:
            lines.append(f"| {label} | {_stat(e['aw_share'][blk])} |")
    lines += ["", "| measured at the snapshots | mean [min, max] |", "|---|---|"]
    for label, st in e["quantities"].items():
        if st["n"]:
            lines.append(f"| {label} | {_stat(st, 3)} |")
    return lines


def _acc_cell(iv: dict | None) -> str:
    if not iv:
        return "-"
    lo, hi = iv["ci95"]
    return f"{100 * iv['acc']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def one_step_lines(one: dict) -> list[str]:
    b = one["before"]
    names = list(one.get("set_sizes") or [k for k in b if "/" in k])
    sizes = one.get("set_sizes", {})
    lines = [
        "",
        f"## One step from step {one['step']} on 1-var data (layer-2 W_Q, W_K only)",
        "",
        f"Snapshot: {one.get('rule', '')}. {one.get('order')} order; a = {_f(one['a'])}; "
        f"G1: {one.get('prediction', 'closed')}. Loss on the step's batch before "
        f"{_f(b.get('batch_loss'))}, `=` attention on 2-var values "
        f"{_f(b.get('2var_value_attention'))}.",
        "",
        "Ideal routing (layer-2 attention replaced by 1/2 on each value position; the most "
        "a key-query update can give, first 2048 of each set): "
        + ", ".join(f"{k} {_f(v)}" for k, v in one.get("oracle_routing_accuracy", {}).items())
        + ".",
        "",
        "Accuracy in percent [Wilson 95% interval]; set sizes: "
        + ", ".join(f"{n} {sizes.get(n, '?')}" for n in names)
        + ". Sizes: lr (plain SGD) or t = RMS change of `=`'s layer-2 scores on the batch.",
        "",
        "| family | size | RMS dscore | "
        + " | ".join(names)
        + " | batch loss | 2-var value att. |",
        "|---" * (len(names) + 5) + "|",
        _one_step_row("before", "-", "0", b, names),
    ]  # fmt: skip
    for fam, rows in one["families"].items():
        for row in rows:
            size = f"lr={row['lr']:g}" if "lr" in row else f"t={row['t']:g}"
            lines.append(_one_step_row(fam, size, _f(row["rms_dscore"], 2), row, names))
    return lines


def _one_step_row(family: str, size: str, rms: str, row: dict, names: list[str]) -> str:
    cells = " | ".join(_acc_cell(row.get("intervals", {}).get(n)) for n in names)
    return (f"| {family} | {size} | {rms} | {cells} | {_f(row.get('batch_loss'))} | "
            f"{_f(row.get('2var_value_attention'))} |")  # fmt: skip


def header_lines(result: dict) -> list[str]:
    """The task, the batch, G1's source, the frame, the null levels and the phases."""
    o, frame = result["options"], result.get("frame", "orth")
    lines = [
        f"# compare-qk: {result['run_dir']}",
        "",
        f"p={result['task']['p']}, K={result['task']['K']}, L={result['task']['L']}; "
        f"{o['batch_size']} 1-var sequences ({o['order']} order, {o['distribution']}; G1 of "
        "the same distribution); "
        f"a from attention to the {o['ab_from']}; prediction layout {o['layout']}; G1 "
        + (
            "from the closed form of theory/ (all K variables assigned)."
            if result.get("prediction", "closed") == "closed"
            else f"of the theorem's model on {o.get('prediction_size')} sampled sequences of "
            "the comparison's distribution (the closed form needs 2K <= L - 4)."
        ),
        f"Definitions: docs/compare_qk.md. cos = cosine(theory's G1, observed) in the "
        f"{frame} frame ({DESCRIPTION.get(frame, '')}).",
        f"Null level (95% of random blocks): whole {_f(result['null95']['all'])}, "
        f"bar_v x bar_v {_f(result['null95']['barv_barv'])}.",
        "",
    ]
    ph = result.get("phases") or {}
    fs, ss = ph.get("first_spike"), ph.get("second_spike")

    def window(s):
        return "none" if not s else "{}-{}".format(s["start_step"], s["end_step"])

    lines.append(
        f"Phases: 0-var >= 90% at {ph.get('zero_var_learned_step')}; first spike "
        f"{window(fs)}; second spike {window(ss)}."
    )
    return lines


def snapshot_row(r: dict, frame: str) -> str:
    """One snapshot's row of the per-snapshot table (`snapshot_table`)."""
    c = r["comparison"][frame]
    m = r["metrics_acc"]
    acc = "/".join(_f(m.get(k), 2) for k in ("0var/ind", "1var/ind", "2var/ind"))

    def cs(sub):
        return " / ".join(
            _f(c[v]["cos"][sub], 2) if v in c else "-"
            for v in ("grad_ce", "grad_lin", "diff", "diff_nodecay")
        )

    terms = r.get("terms") or {}
    share = " / ".join(
        _f((terms.get(k) or {}).get("aw_share_vs_memory"), 2)
        for k in ("pred", "weights", "grad_ce")
    )
    e = r["assumptions"]["embeddings"]
    a = r["assumptions"]
    nd = (c.get("diff") or {}).get("null95_signs") or {}
    null = f"{_f(nd.get('all'), 2)} / {_f(nd.get('barv_barv'), 2)}" if nd else "-"
    scn = (r.get("score_change") or {}).get("norm", {}).get("all")
    change = " / ".join(_f(scn[k], 1) for k in ("total", "w_qk", "vectors")) if scn else "-"
    return (
        f"| {r['step']} | {acc} | {_f(r['a'])} | {_f(r['beta'], 2)} | {cs('all')} | "
        f"{cs('barv_barv')} | {null} | {change} | {share} | "
        f"{_f(c['grad_ce']['identity']['row_argmax_on_diag'], 1)} | "
        f"{_f(c['grad_ce']['attenuation']['fraction'], 2)} | "
        f"{_f(e['embeddings_max_abs_cos_excluding_cooccurring'], 2)}/"
        f"{_f(e['embeddings']['mean_abs_cos'], 2)} | "
        f"{_f(e['ebar']['max_abs_cos'], 2)} | {_f(a['l1_eq_to_operands_mass'], 2)} | "
        f"{_f(a['l1_num_to_prev_mass'], 2)} | {_f(a['ov2_mlp2_accuracy'], 2)} | "
        f"{_f(a.get('oracle_routing_accuracy'), 2)} |"
    )


def snapshot_table(result: dict) -> list[str]:
    """The per-snapshot section: its legend and a row per snapshot (headline frame)."""
    frame = result.get("frame", "orth")
    lines = [
        "",
        "## Per snapshot",
        "",
        "cos columns: G1 against the -gradient (cross-entropy) / -gradient (first order) / "
        "observed update to the next snapshot / the same without weight decay, "
        f"{frame} frame; sign null: the update's sign-randomised null (95%). Score change: "
        "|change of the labelled scores| to the next snapshot, and its W_QK part / the "
        "moving vectors' part (raw frame). all-assignment share: assignment-wide / "
        "(assignment-wide + memory) energy in G1 / the current W_QK's scores (raw) / the "
        "cross-entropy gradient.",
        "",
        "| step | acc 0v/1v/2v | a | beta | cos all: grad_ce / grad_lin / diff / diff_nodecay "
        "| cos bar_v: grad_ce / grad_lin / diff / diff_nodecay | sign null of diff: all / "
        "bar_v | score change: total / W_QK / vectors | all-assignment share "
        "| id(grad_ce) | atten. sign "
        "| emb max (w/o +/pos12, =/pos15) / mean abs cos | ebar max abs cos | L1 `=`->ops "
        "| L1 num->prev | OV-MLP | ideal-routing acc |",
        "|---" * 17 + "|",
    ]
    return lines + [snapshot_row(r, frame) for r in result["steps"]]


def summary_markdown(result: dict) -> str:
    """summary.md of a comparison (`run_comparison.compare_run`'s result)."""
    lines = header_lines(result) + window_tables(result) + snapshot_table(result)
    one = result.get("one_step")
    if one and "families" in one:
        lines += one_step_lines(one)
    elif one:
        lines += ["", f"One-step test skipped: {one.get('skipped')}"]
    lines.append("")
    return "\n".join(lines)
