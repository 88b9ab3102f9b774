"""Writing a comparison: compare_qk.json (every number), blocks.npz (every block), summary.md,
and the figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from empirical.compare_qk.pipeline import jsonable


def _f(x, nd=3):
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}f}"


def write_blocks(result: dict, path: Path) -> Path:
    """blocks.npz: steps, row/col labels, and per block name an array [n_steps, R, C]
    (NaN where a step has no such block, e.g. `diff` at the last snapshot)."""
    rows, cols = result["labels"]["rows"], result["labels"]["cols"]
    steps = [r["step"] for r in result["steps"]]
    arrays = {"steps": np.array(steps), "rows": np.array(rows), "cols": np.array(cols)}
    for name, items in result["_blocks"].items():
        A = np.full((len(steps), len(rows), len(cols)), np.nan)
        for s, M in items:
            A[steps.index(s)] = M
        arrays[name.replace("/", "__")] = A
    np.savez_compressed(path, **arrays)
    return path


def summary_markdown(result: dict) -> str:
    R = result["steps"]
    o = result["options"]
    lines = [
        f"# compare-qk: {result['run_dir']}",
        "",
        f"p={result['task']['p']}, K={result['task']['K']}, L={result['task']['L']}; "
        f"{o['batch_size']} 1-var sequences ({o['order']} order, {o['distribution']}); "
        f"a from attention to the {o['ab_from']}; prediction layout {o['layout']}.",
        "Definitions: docs/compare_qk.md. cos = cosine(theory's G1 block, observed block); "
        "'orth' = labels on the closest orthonormal vectors, 'raw' = the model's vectors.",
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
    win = result.get("windows") or {}
    if win:
        lines += [
            "",
            "Means over training windows (orth frame; cos all / cos bar_v / identity rows / "
            "attenuation sign agreement):",
            "",
            "| window | steps | grad_ce | grad_lin | sgd_factored | diff_perp |",
            "|---|---|---|---|---|---|",
        ]
        for name, e in win.items():
            cells = []
            for var in ("grad_ce", "grad_lin", "sgd_factored", "diff_perp"):
                v = e.get(f"orth/{var}")
                cells.append(
                    "-"
                    if v is None
                    else " / ".join(
                        _f(v[k], 2)
                        for k in ("cos_all", "cos_barv", "identity_rows", "attenuation_sign")
                    )
                )
            lines.append(
                f"| {name} | {e['steps'][0]}-{e['steps'][1]} ({e['n']}) | "
                + " | ".join(cells)
                + " |"
            )
    lines += [
        "",
        "| step | acc 0v/1v/2v | a | beta | cos all (orth): grad_ce / grad_lin / sgd / diff_perp "
        "| cos bar_v (orth): grad_ce / grad_lin / sgd / diff_perp | id(grad_ce) | atten. sign "
        "| emb max (w/o +/pos12, =/pos15) / mean abs cos | ebar max abs cos | L1 `=`->ops "
        "| L1 num->prev | OV-MLP | ideal-routing acc |",
        "|---" * 14 + "|",
    ]
    for r in R:
        c = r["comparison"]["orth"]
        m = r["metrics_acc"]
        acc = "/".join(_f(m.get(k), 2) for k in ("0var/ind", "1var/ind", "2var/ind"))

        def cs(sub, c=c):
            return " / ".join(
                _f(c[v]["cos"][sub], 2) if v in c else "-"
                for v in ("grad_ce", "grad_lin", "sgd_factored", "diff_perp")
            )

        e = r["assumptions"]["embeddings"]
        a = r["assumptions"]
        lines.append(
            f"| {r['step']} | {acc} | {_f(r['a'])} | {_f(r['beta'], 2)} | {cs('all')} | "
            f"{cs('barv_barv')} | {_f(c['grad_ce']['identity']['row_argmax_on_diag'], 1)} | "
            f"{_f(c['grad_ce']['attenuation']['fraction'], 2)} | "
            f"{_f(e['embeddings_max_abs_cos_excluding_cooccurring'], 2)}/"
            f"{_f(e['embeddings']['mean_abs_cos'], 2)} | "
            f"{_f(e['ebar']['max_abs_cos'], 2)} | {_f(a['l1_eq_to_operands_mass'], 2)} | "
            f"{_f(a['l1_num_to_prev_mass'], 2)} | {_f(a['ov2_mlp2_accuracy'], 2)} | "
            f"{_f(a.get('oracle_routing_accuracy'), 2)} |"
        )
    one = result.get("one_step")
    if one and "families" in one:
        b = one["before"]
        lines += [
            "",
            f"## One step from step {one['step']} on 1-var data (layer-2 W_Q, W_K only)",
            "",
            f"Before: 0var/ind {_f(b.get('0var/ind'))}, 1var/ind {_f(b.get('1var/ind'))}, "
            f"2var/ind {_f(b.get('2var/ind'))}, loss on the step's batch "
            f"{_f(b.get('batch_loss'))}, `=` attention on 2-var values "
            f"{_f(b.get('2var_value_attention'))} ({one.get('order')} order; a = {_f(one['a'])}).",
            "",
            "Ideal routing (layer-2 attention replaced by 1/2 on each value position; the most "
            "a key-query update can give): "
            + ", ".join(f"{k} {_f(v)}" for k, v in one.get("oracle_routing_accuracy", {}).items())
            + ".",
            "",
            "Sizes: lr (plain SGD) or t = RMS change of `=`'s layer-2 scores on the batch.",
            "",
            "| family | size | RMS dscore | max dS orth | 0var | 1var | 2var | batch loss "
            "| 2-var value attention |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for fam, rows in one["families"].items():
            for row in rows:
                size = f"lr={row['lr']:g}" if "lr" in row else f"t={row['t']:g}"
                lines.append(
                    f"| {fam} | {size} | {_f(row['rms_dscore'], 2)} | "
                    f"{_f(row['max_abs_dS_orth'], 2)} | "
                    f"{_f(row.get('0var/ind'))} | {_f(row.get('1var/ind'))} | "
                    f"{_f(row.get('2var/ind'))} | {_f(row.get('batch_loss'))} | "
                    f"{_f(row.get('2var_value_attention'))} |"
                )
    elif one:
        lines += ["", f"One-step test skipped: {one.get('skipped')}"]
    lines.append("")
    return "\n".join(lines)


def write_outputs(result: dict, out_dir, figures: bool = True) -> dict[str, Path]:
    """Write everything under out_dir; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    paths["json"] = out / "compare_qk.json"
    paths["json"].write_text(json.dumps(jsonable(result), indent=1))
    paths["blocks"] = write_blocks(result, out / "blocks.npz")
    paths["summary"] = out / "summary.md"
    paths["summary"].write_text(summary_markdown(result))
    if figures:
        from empirical.compare_qk import plots

        name = Path(result["run_dir"]).name
        paths["cosines"] = plots.plot_cosines(
            result, out / "cosines.png", f"{name}: theory's G1 vs observed layer-2 QK update"
        )
        paths["structure"] = plots.plot_structure(
            result, out / "structure.png", f"{name}: associative memory and attenuation"
        )
        paths["assumptions"] = plots.plot_assumptions(
            result, out / "assumptions.png", f"{name}: the theorem's assumptions, measured"
        )
        one = result.get("one_step")
        rows, cols = result["labels"]["rows"], result["labels"]["cols"]
        at = one.get("step") if one and "step" in one else result["steps"][-1]["step"]
        blocks = {k: M for k, items in result["_blocks"].items() for s, M in items if s == at}
        if blocks:
            paths["blocks_png"] = plots.plot_blocks(
                blocks, rows, cols, result["task"]["L"], out / f"blocks_step_{at:06d}.png",
                f"{name}, step {at}: blocks (rows: query, columns: key)",
            )  # fmt: skip
        if one and "families" in one:
            paths["one_step"] = plots.plot_one_step(
                one, out / "one_step.png",
                f"{name}: one step on 1-var data from step {one['step']}",
            )  # fmt: skip
    return paths
