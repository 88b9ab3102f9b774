"""`python -m empirical analyze` on a chain run (any depth): the chain's mechanisms in one
report (docs/chain.md, "Everything at once"): the attention per layer and over training,
patching, the ebar identity of the last layer's QK and the Gromov fit of its MLP on 0-var
sums. `analyze_chain_run` writes OUT/analysis.json, OUT/summary.md and the figures;
`analyze_chain` is what `analyze` runs on a chain run (empirical.studies.registry).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from disentangled.command_line import prepare_output_dir
from empirical.analysis.fourier import fit_gromov, grid_preactivations
from empirical.analysis.qk import ebar_identity_matrix, identity_summary
from empirical.config.io import ConfigError
from empirical.report.writer import Figure, Json, Report, write_report
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir
from empirical.studies.chain.analysis.attention import (
    chain_attention,
    chain_attention_over_training,
    formation_steps,
    key_series,
    plot_chain_attention,
    plot_chain_attention_over_training,
)
from empirical.studies.chain.analysis.patching import (
    CORRUPTIONS,
    chain_patching,
    plot_chain_patching,
)
from empirical.studies.options import AnalyzeOptions
from empirical.task.eval_sets import load_eval_sets

__all__ = ["analyze_chain", "analyze_chain_run", "last_mlp_fourier", "last_qk_identity",
           "report"]  # fmt: skip


@torch.no_grad()
def last_mlp_fourier(model, p: int, prefix: torch.Tensor) -> dict:
    """The Gromov fit of every neuron of the last layer's MLP, from the full model's
    pre-activations at `=` over all p x p operand pairs of the 0-var sequence `prefix` (one
    sequence of L tokens, its operands at L-3 and L-2 replaced). FourierFit.summary()."""
    grid = grid_preactivations(model, prefix, p)
    return fit_gromov(grid).summary()


@torch.no_grad()
def last_qk_identity(model, vocab) -> list[dict]:
    """The ebar identity of the last layer's QK (the paper's Figure 7b one layer up): for every
    pair of earlier layers (a, b), S[u, v] = (=, its position, W_E[var u] W_OV^a) W_QK^last
    (mean number, W_E[var v] W_OV^b)^T and how much of an identity it is (identity_summary)."""
    n = model.cfg.n_layers
    out = []
    for a in range(n - 1):
        for b in range(n - 1):
            S = ebar_identity_matrix(model, vocab.p, vocab.K, vocab.L, vocab.eq, n - 1, a, b)
            row = identity_summary(S)
            out.append({"query_ov_layer": a + 1, "key_ov_layer": b + 1, **row})
    return out


def _fmt(v) -> str:
    return "-" if v is None else f"{round(v, 3) + 0.0:.3f}"


def _summary_md(run_label: str, res: dict) -> str:
    lines = [f"# Chain mechanisms: {run_label} ({res['set']}, {res['n']} sequences, "
             f"{res['weights']})", ""]  # fmt: skip
    att = res["attention"]
    n_layers = len(att["uniform"])
    lines += ["## Attention onto the construction's targets, per layer", "",
              "| measure | " + " | ".join(f"layer {i + 1}" for i in range(n_layers)) + " |",
              "|---" * (n_layers + 1) + "|"]  # fmt: skip
    lines += [f"| {m} | " + " | ".join(_fmt(v) for v in vals) + " |" for m, vals in att.items()]
    if res.get("formed_at_half_rise"):
        lines += ["", "## Over training: the first snapshot at half of each measure's rise", "",
                  "| measure | step | peak (at step) |", "|---|---|---|"]  # fmt: skip
        for m, f in res["formed_at_half_rise"].items():
            step = "never rises" if f["step"] is None else str(f["step"])
            peak = "-" if f["peak"] is None else f"{f['peak']:.3f} ({f['peak_step']})"
            lines.append(f"| {m} | {step} | {peak} |")
    for pr in res["patching"]:
        lines += ["", f"## Patching, corrupted: the {pr['corruption']} ({pr['n']} sequences)", "",
                  "share of the clean-minus-corrupted logit difference restored by the clean "
                  "residual stream at one position", "",
                  "| stream point | " + " | ".join(pr["roles"]) + " |",
                  "|---" * (len(pr["roles"]) + 1) + "|"]  # fmt: skip
        for point in pr["points"]:
            cells = " | ".join(_fmt(pr["restored"][point].get(r)) for r in pr["roles"])
            lines.append(f"| {point} | {cells} |")
    ident = res.get("last_qk_identity")
    if ident:
        lines += ["", f"## The ebar identity of layer {n_layers}'s QK", "",
                  "S[u, v] = (=, W_E[var u] W_OV^a) W_QK^last (mean number, W_E[var v] W_OV^b)^T: "
                  "rows whose strict argmax is v = u, and the diagonal's mean margin over the "
                  "best other entry (in units of S's spread)", "",
                  "| query ebar via layer a | key ebar via layer b | rows on the diagonal | "
                  "margin (/ std) |", "|---|---|---|---|"]  # fmt: skip
        for r in ident:
            lines.append(f"| {r['query_ov_layer']} | {r['key_ov_layer']} | "
                         f"{r['identity_score']:.2f} | {r['margin_mean']:.2f} "
                         f"({r['margin_over_std']:.2f}) |")  # fmt: skip
    f = res.get("fourier")
    if f:
        lines += ["", f"## The last layer's MLP on 0-var sums (layer {n_layers})", "",
                  "- neurons fitted by cos(w x + a) + cos(w y + b) with R^2 >= "
                  f"{f['r2_threshold']}: {100 * f['frac_r2_above_threshold']:.1f}% of "
                  f"{f['n_active']} active (R^2 >= 0.9: {100 * f['frac_r2_above_0.9']:.1f}%; "
                  f"median {f['r2_median_active']:.3f})",
                  f"- key frequencies: {f['key_frequencies']}",
                  f"- best neuron {f['best_neuron']}: R^2 {f['best_neuron_r2']:.3f} at frequency "
                  f"{f['best_neuron_freq']}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _chain_set(sets, set_name: str | None) -> str:
    """`set_name`, or by default chain/1var_h2 where the run has it, else its 1-var set of the
    most hops; a ConfigError if the run has no such set."""
    if set_name is None:
        ones = sorted((s for s in sets if s.startswith("chain/1var_h")), key=lambda s: int(s[12:]))
        set_name = "chain/1var_h2" if "chain/1var_h2" in sets else (ones[-1] if ones else None)
    if set_name not in sets:
        raise ConfigError(f"set {set_name!r}: the run's sets are {', '.join(sets)}")
    return set_name


def _figures(res: dict, history: dict | None, label: str) -> Report:
    """The report's figures: attention per layer (and over training), patching."""
    set_name = res["set"]
    files = {"chain_attention": Figure(lambda: plot_chain_attention(
        res["attention"], None,
        f"Attention onto the chain's targets per layer ({label}, {set_name})"))}
    if history is not None:
        files["chain_attention_steps"] = Figure(lambda: plot_chain_attention_over_training(
            history, None, f"The chain's attention over training ({label}, {set_name})"))
    files["chain_patching"] = Figure(lambda: plot_chain_patching(
        res["patching"], None, f"Which layer carries which hop ({label}, {set_name})"))
    return Report(files, summary=None)  # fmt: skip


def report(res: dict, label: str) -> Report:
    """analysis.json and summary.md of the chain report `res`."""
    return Report({RunDir.ANALYSIS_JSON: Json(res, indent=2, plain=True),
                   RunDir.SUMMARY_MD: _summary_md(label, res)})  # fmt: skip


def analyze_chain_run(run_dir, step: int | None = None, out_dir=None, set_name: str | None =
                      None, n: int = 300, dynamics: bool = True, figures: bool = True,
                      fmt: str = "png") -> dict:  # fmt: skip
    """The chain report of a run on `n` sequences of `set_name` (default: chain/1var_h2 where
    the run has it, else its 1-var set of the most hops); returns the payload."""
    from empirical.runs.rundir import RunDir

    t0 = time.perf_counter()
    run = RunDir(run_dir).require_run()
    out = Path(out_dir) if out_dir is not None else run.analysis_dir(step)
    out.mkdir(parents=True, exist_ok=True)
    sets = load_eval_sets(run.eval_sets)
    set_name = _chain_set(sets, set_name)
    model, vocab = load_run(run.path, step=step)
    model.eval()
    tokens = sets[set_name].tokens[:n]
    res: dict = {"set": set_name, "n": int(tokens.shape[0]),
                 "weights": f"step {step}" if step is not None else "latest weights"}  # fmt: skip
    with torch.no_grad():
        res["attention"] = chain_attention(model, vocab, tokens)
    history = None
    if dynamics and step is None and run.snapshot_steps():
        history = chain_attention_over_training(run.path, tokens)
        series = key_series(history)
        res["steps"], res["key_series"] = history["steps"], series
        res["formed_at_half_rise"] = formation_steps(history["steps"], series)
    res["patching"] = [chain_patching(model, vocab, tokens, c) for c in CORRUPTIONS]
    res["last_qk_identity"] = last_qk_identity(model, vocab)
    zero = sets.get("chain/0var")
    if zero is not None and len(zero):
        res["fourier"] = last_mlp_fourier(model, vocab.p, zero.tokens[0])
    label = run.label()
    res["figures"] = []
    if figures:  # drawn first: analysis.json names them, and counts their time
        drawn = write_report(_figures(res, history, label), out, fmt=fmt)
        res["figures"] = [path.name for path in drawn.values()]
    res["seconds"] = time.perf_counter() - t0
    write_report(report(res, label), out)
    return res


def analyze_chain(run_dir: RunDir, opts: AnalyzeOptions) -> int:
    """`analyze` on a chain run (its AnalyzeOptions: --step, --out, --no-dynamics,
    --no-figures, --format, --quiet); exit status 0."""
    out = prepare_output_dir(opts.out_dir or run_dir.analysis_dir(opts.step))
    result = analyze_chain_run(run_dir.path, step=opts.step, out_dir=out, dynamics=opts.dynamics,
                               figures=opts.figures, fmt=opts.fmt)  # fmt: skip
    if not opts.quiet:
        print((out / RunDir.SUMMARY_MD).read_text())
    print(f"wrote {out}/analysis.json, summary.md and {len(result['figures'])} figures in "
          f"{result['seconds']:.1f} s", file=sys.stderr)  # fmt: skip
    return 0
