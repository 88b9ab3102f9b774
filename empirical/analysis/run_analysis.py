"""All analyses of one run: numbers in analysis.json, figures, and a markdown summary.

    result = analyze_run("runs/paper/seed0")            # final checkpoint + every snapshot
    result = analyze_run(run_dir, step=5000)            # another snapshot
    result = analyze_run(run_dir, AnalysisOptions(n_probe=256, figures=False))

Writes to RUN_DIR/analysis (RUN_DIR/analysis/step_XXXXXX with `step`) the figures, then
analysis.json (`analysis_json`) and summary.md (markdown_summary), through the one report
writer (every file: docs/analysis.md, "Output files"). The model's analyses, their numbers,
rows and figures are declared in model_analysis; this module adds what only a run has: the
snapshots over training, the two step comparisons around the spikes, the metrics log.
Everything that can be wrong with the inputs is checked before any analysis runs.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from empirical.analysis.common import to_jsonable, torch_threads
from empirical.analysis.markdown_summary import summary_markdown
from empirical.analysis.model_analysis import analyze_model, model_figures
from empirical.analysis.options import AnalysisOptions
from empirical.analysis.plots.over_training import plot_progress, plot_second_spike
from empirical.analysis.plots.spike_steps import (
    plot_first_spike_comparison,
    plot_second_spike_comparison,
)
from empirical.analysis.probe_data import ProbeData, make_probe_data
from empirical.analysis.progress import (
    ALL_MEASURES,
    ProgressHistory,
    definition_agreement,
    phase2_levels,
    progress_over_training,
)
from empirical.analysis.spikes import (
    chosen_compare_steps,
    compare_first_spike,
    compare_second_spike,
    comparison_numbers,
)
from empirical.model.checkpoint import load_checkpoint, model_from_checkpoint
from empirical.report.stats import accuracy_intervals
from empirical.report.style import DPI
from empirical.report.writer import Figure, Json, Report, write_report
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir
from empirical.task.registry import family_of

__all__ = ["RunAnalysis", "analysis_json", "analyze_run", "figures", "report"]


@dataclass
class CheckedInputs:
    """What a run's analysis reads, each checked to be this run's before any work."""

    model: object
    model_step: int | None
    model_path: Path
    held_out: object  # the run's held-out pairs (None: no evaluation sets)
    set_sizes: dict[str, int]
    records: list[dict]
    phases: object  # empirical.runs.phases.Phases, None without a metrics log
    compare: dict  # {"first_spike": (A, B) | None, "second_spike": ...}


def _load_target(run_dir: RunDir, step: int | None):
    path = run_dir.model_path(step)
    ckpt = load_checkpoint(path)
    run_dir.check_model_file(ckpt, path)  # not another run's weights
    model = model_from_checkpoint(ckpt, path)
    found = ckpt.get("step", step)
    return model, (int(found) if found is not None else None), path


def _checked_inputs(run_dir: RunDir, cfg, opts: AnalysisOptions) -> CheckedInputs:
    """Load the model, the evaluation sets and the metrics log, and check the compared steps
    and the example: every error is raised here, before the work."""
    model, model_step, model_path = _load_target(run_dir, opts.step)
    held, set_sizes = None, {}
    eval_sets = run_dir.read_eval_sets(cfg)  # checked to be this run's (None: absent)
    if eval_sets is not None:
        held = eval_sets.held_out
        set_sizes = {name: len(batch) for name, batch in eval_sets.items()}
    records = run_dir.read_metrics()  # checked (a bad line: an error) before the work
    phases = detect_phases(records) if records else None
    compare = chosen_compare_steps(run_dir, phases, records, opts.first_spike_steps,
                                   opts.second_spike_steps)  # fmt: skip
    if opts.example:
        family_of(cfg.task).vocabulary(cfg.task).encode(opts.example)
    return CheckedInputs(model, model_step, model_path, held, set_sizes, records, phases, compare)


@dataclass
class RunAnalysis:
    """What one run's analysis computed: analysis.json, summary.md and the figures are made
    of it. `numbers` / `raw`: the model's analyses (analyze_model); `history`: the snapshots
    over training (None without --dynamics or snapshots); `first_cmp` / `second_cmp`: the
    step comparisons around the spikes (None where not compared)."""

    run_dir: RunDir
    cfg: object
    seed: int
    inputs: CheckedInputs
    data: ProbeData
    numbers: dict
    raw: dict
    history: ProgressHistory | None
    first_cmp: dict | None
    second_cmp: dict | None

    @property
    def label(self) -> str:
        return self.run_dir.label(self.cfg)


def analysis_json(a: RunAnalysis) -> dict:
    """analysis.json's content (without "figures" and "seconds", added once the figures are
    drawn): the model's numbers, the accuracies at its step, the phases, the over-training
    history with its phase-2 plateau, and both spike comparisons (keys: docs/analysis.md)."""
    task, inputs, history = a.cfg.task, a.inputs, a.history
    acc = next((r["acc"] for r in inputs.records if r["step"] == inputs.model_step), None)
    sizes = inputs.set_sizes
    return {
        "run_dir": str(a.run_dir.path),
        "checkpoint": str(inputs.model_path),
        "step": inputs.model_step,
        "seed": a.seed,
        "task": {"p": task.p, "K": task.K, "L": task.L, "r1": task.r1, "r2": task.r2},
        "probe_data": a.data.describe(),
        "model": a.numbers,
        "accuracy_at_step": acc,
        "accuracy_at_step_ci95": accuracy_intervals(acc, sizes) if acc and sizes else None,
        "phases": inputs.phases.to_dict() if inputs.phases is not None else None,
        "measures": {
            name: {"threshold": t, "definition": d} for name, (t, d) in ALL_MEASURES.items()
        },
        "training_dynamics": to_jsonable(history.to_dict()) if history else None,
        "phase2_plateau": to_jsonable(phase2_levels(history, inputs.phases)),
        "definition_agreement": to_jsonable(definition_agreement(history)) if history else None,
        "spike_comparisons": {
            "steps": inputs.compare,
            "first_spike": to_jsonable(comparison_numbers(a.first_cmp)),
            "second_spike": to_jsonable(comparison_numbers(a.second_cmp)),
        },
    }


def figures(a: RunAnalysis) -> Report:
    """Every figure of the run's analysis: the model's (declared in model_analysis), over
    training (Figures 12, 9) and the step comparisons (Figures 8, 9c / 9d)."""
    label, task, inputs, history = a.label, a.cfg.task, a.inputs, a.history
    draws = model_figures(a.raw, task, f"{label}, step {inputs.model_step}")
    if history is not None:
        draws["progress_measures"] = lambda: plot_progress(
            history, inputs.records, inputs.phases, None,
            f"Progress measures over training ({label})")
        draws["second_spike"] = lambda: plot_second_spike(
            history, inputs.records, inputs.phases, task.r2, None,
            f"Variables as second operand over training ({label}; never second in training: "
            f"{', '.join(task.r2) or 'none'})")
    if a.first_cmp is not None:
        s, b = a.first_cmp["steps"]
        draws["first_spike_steps"] = lambda: plot_first_spike_comparison(
            a.first_cmp, None, f"Figure 8: the model before (step {s}) and after (step {b}) "
            f"the first spike ({label})")
    if a.second_cmp is not None:
        c, d = a.second_cmp["steps"]
        draws["second_spike_steps"] = lambda: plot_second_spike_comparison(
            a.second_cmp, None, f"Figures 9c / 9d: variables as the second operand before "
            f"(step {c}) and after (step {d}) the second spike ({label})")
    return Report({stem: Figure(draw, dpi=DPI) for stem, draw in draws.items()}, summary=None)


def report(result: dict) -> Report:
    """analysis.json and summary.md of the content `result` (analysis_json, with the
    figures' names and the time taken)."""
    return Report({
        RunDir.ANALYSIS_JSON: Json(result, indent=1, plain=True),
        RunDir.SUMMARY_MD: summary_markdown(result),
    })  # fmt: skip


def _analyse(run_dir: RunDir, cfg, opts: AnalysisOptions, seed: int) -> RunAnalysis:
    inputs = _checked_inputs(run_dir, cfg, opts)
    data = make_probe_data(cfg.task, seed, n=opts.n_probe)
    numbers, raw = analyze_model(inputs.model, cfg.task, data, inputs.held_out, seed)
    history = None
    if opts.dynamics and run_dir.snapshots():
        history = progress_over_training(run_dir.path, data, every=opts.every,
                                         progress=opts.progress)  # fmt: skip
    first_cmp = second_cmp = None  # the two step comparisons (Figure 8; Figures 9c / 9d)
    if inputs.compare["first_spike"]:
        first_cmp = compare_first_spike(run_dir, data, inputs.compare["first_spike"],
                                        opts.example)  # fmt: skip
    if inputs.compare["second_spike"]:
        second_cmp = compare_second_spike(run_dir, data, inputs.compare["second_spike"])
    return RunAnalysis(run_dir, cfg, seed, inputs, data, numbers, raw, history, first_cmp,
                       second_cmp)  # fmt: skip


def analyze_run(run_dir: str | Path, opts: AnalysisOptions | None = None, **fields) -> dict:
    """Analyse the run in `run_dir` (final checkpoint, or the snapshot at `opts.step`) and,
    with `opts.dynamics`, every `opts.every`-th snapshot; write the figures (`opts.fmt`: png,
    pdf or svg), analysis.json and summary.md to `opts.out_dir`. Returns the analysis.json
    content. `fields`: AnalysisOptions' fields, given instead of (or over) `opts`.

    `first_spike_steps` / `second_spike_steps`: the two snapshots compared around each spike
    (Figure 8, Figures 9c / 9d): (A, B), "auto" (from the detected phases, when snapshots
    bracket the spike) or None (skip). `example`: the Figure-8 sequence in token form."""
    opts = AnalysisOptions(**fields) if opts is None else dataclasses.replace(opts, **fields)
    run_dir = RunDir(run_dir).require_run()
    cfg = run_dir.read_two_layer_config("analyze")
    seed = cfg.seed if opts.seed is None else opts.seed
    out_dir = Path(run_dir.analysis_dir(opts.step) if opts.out_dir is None else opts.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with torch_threads(opts.threads):
        analysis = _analyse(run_dir, cfg, opts, seed)
        result = analysis_json(analysis)
        if opts.figures:  # drawn first: analysis.json names them, and counts their time
            drawn = write_report(figures(analysis), out_dir, fmt=opts.fmt)
            result["figures"] = [path.name for path in drawn.values()]
    result["seconds"] = round(time.perf_counter() - t_start, 2)
    write_report(report(result), out_dir)
    return result
