"""`python -m empirical analyze RUN_DIR` on a lego run: the association attention per layer and
over training, on the run's deepest trained hop-count set; writes association.png (or
--format), analysis.json and summary.md to RUN_DIR/analysis (with --step: analysis/step_S).
"""

from __future__ import annotations

import sys
import time

import torch

from disentangled.command_line import UsageError, prepare_output_dir
from empirical.report.tables import markdown_table
from empirical.report.writer import Figure, Json, Report, write_report
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir
from empirical.studies.lego.analysis import (
    association_attention,
    association_over_training,
    plot_association,
)
from empirical.studies.options import AnalyzeOptions
from empirical.task.eval_sets import load_eval_sets

__all__ = ["analyze_lego", "report"]

N_SEQUENCES = 300


def _summary(label: str, set_name: str, res: dict) -> str:
    rows = []
    for m, row in res["attention"].items():
        cells = " | ".join(
            "-" if v is None else f"{v:.3f} ({b:.3f})"
            for v, b in zip(row["mean"], row["best_head"], strict=True)
        )
        chance = "-" if row["chance"] is None else f"{row['chance']:.3f}"
        rows.append(f"{m} | {row['n']} | {chance} | {cells}")
    layers = " | ".join(f"layer {i + 1}" for i in range(res["n_layers"]))
    lines = [
        f"# Association attention: {label}",
        "",
        f"{res['n']} sequences of {set_name}, {res['weights']}. Attention weight on the "
        "target clause per layer (the heads' mean; best head), against a uniform "
        "attention over the visible positions (chance).",
        "",
        *markdown_table(f"measure | instances | chance | {layers}", rows),
    ]
    if res.get("steps"):
        lines += [
            "",
            f"Over training: {len(res['steps'])} snapshots, "
            f"steps {res['steps'][0]}..{res['steps'][-1]} (analysis.json, the figure).",
        ]
    return "\n".join(lines) + "\n"  # fmt: skip


def report(res: dict, label: str) -> Report:
    """analysis.json and summary.md of the association analysis `res`."""
    return Report({RunDir.ANALYSIS_JSON: Json(res, indent=2, plain=True),
                   RunDir.SUMMARY_MD: _summary(label, res["set"], res)})  # fmt: skip


def analyze_lego(run_dir: RunDir, opts: AnalyzeOptions) -> int:
    """The association analysis of a lego run (`analyze`'s options: --step, --out,
    --no-dynamics, --no-figures, --format, --quiet); exit status 0."""
    sets_path = run_dir.eval_sets
    if not sets_path.is_file():
        raise UsageError(f"{run_dir}: no {RunDir.EVAL_SETS} (train the run first)")
    out = prepare_output_dir(opts.out_dir or run_dir.analysis_dir(opts.step))
    t0 = time.perf_counter()
    sets = load_eval_sets(sets_path)
    task = run_dir.read_config().task
    trained = [h for h in task.lego_hops if h not in task.lego_held_out_hops]
    set_name = f"lego/h{max(trained)}"
    tokens = sets[set_name].tokens[:N_SEQUENCES]
    model, vocab = load_run(run_dir.path, step=opts.step)
    with torch.no_grad():
        table = association_attention(model, vocab, tokens)
    res = {"set": set_name, "n": int(tokens.shape[0]), "n_layers": model.cfg.n_layers,
           "weights": f"step {opts.step}" if opts.step is not None else "latest weights",
           "attention": table}  # fmt: skip
    history = None
    if opts.dynamics and opts.step is None and run_dir.snapshot_steps():
        history = association_over_training(run_dir.path, tokens)
        res["steps"], res["over_training"] = history["steps"], history["tables"]
    res["figures"] = []
    label = run_dir.label()
    if opts.figures:  # drawn first: analysis.json names it, and counts its time
        figure = Figure(lambda: plot_association(
            table, history, None, f"Association attention ({label}, {set_name})"))
        drawn = write_report(Report({"association": figure}, summary=None), out, fmt=opts.fmt)
        res["figures"] = [path.name for path in drawn.values()]
    res["seconds"] = time.perf_counter() - t0
    write_report(report(res, label), out)
    if not opts.quiet:
        print(_summary(label, set_name, res))
    print(f"wrote {out}/analysis.json, summary.md and {len(res['figures'])} figures in "
          f"{res['seconds']:.1f} s", file=sys.stderr)  # fmt: skip
    return 0
