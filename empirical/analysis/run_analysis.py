"""All analyses of one run: numbers in analysis.json, figures, and a markdown summary.

    result = analyze_run("runs/paper/seed0")            # final checkpoint + every snapshot
    result = analyze_run(run_dir, step=5000)            # another snapshot

Writes to RUN_DIR/analysis (RUN_DIR/analysis/step_XXXXXX with `step`) analysis.json
(empirical.analysis.analysis_json), summary.md (markdown_summary) and the figures (run_figures;
every file: docs/analysis.md, "Output files"). Everything that can be wrong with the inputs is
checked before any analysis runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from empirical.analysis.analysis_json import analysis_json
from empirical.analysis.common import torch_threads
from empirical.analysis.markdown_summary import summary_markdown
from empirical.analysis.model_analysis import analyze_model
from empirical.analysis.probe_data import ProbeData, make_probe_data
from empirical.analysis.progress import phase2_levels, progress_over_training
from empirical.analysis.run_figures import write_figures, write_spike_figures
from empirical.analysis.spikes import (
    chosen_compare_steps,
    compare_first_spike,
    compare_second_spike,
)
from empirical.model import load_checkpoint, model_from_checkpoint
from empirical.report.files import atomic_write_bytes
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir
from empirical.task.registry import family_of


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


def _checked_inputs(run_dir: RunDir, cfg, step, first_steps, second_steps, example):
    """Load the model, the evaluation sets and the metrics log, and check the compared steps
    and the example: every error is raised here, before the work."""
    model, model_step, model_path = _load_target(run_dir, step)
    held, set_sizes = None, {}
    eval_sets = run_dir.read_eval_sets(cfg)  # checked to be this run's (None: absent)
    if eval_sets is not None:
        held = eval_sets.held_out
        set_sizes = {name: len(batch) for name, batch in eval_sets.items()}
    records = run_dir.read_metrics()  # checked (a bad line: an error) before the work
    phases = detect_phases(records) if records else None
    compare = chosen_compare_steps(run_dir, phases, records, first_steps, second_steps)
    if example:
        family_of(cfg.task).vocabulary(cfg.task).encode(example)
    return CheckedInputs(model, model_step, model_path, held, set_sizes, records, phases, compare)


def _spike_comparisons(run_dir: RunDir, data: ProbeData, compare: dict, example):
    """The two step comparisons (Figure 8; Figures 9c / 9d), None where not compared."""
    first_cmp = second_cmp = None
    if compare["first_spike"]:
        first_cmp = compare_first_spike(run_dir, data, compare["first_spike"], example)
    if compare["second_spike"]:
        second_cmp = compare_second_spike(run_dir, data, compare["second_spike"])
    return first_cmp, second_cmp


def analyze_run(
    run_dir: str | Path, step: int | None = None, out_dir: str | Path | None = None,
    dynamics: bool = True, every: int = 1, n_probe: int = 2048, seed: int | None = None,
    threads: int | None = 1, progress: bool = False, figures: bool = True, fmt: str = "png",
    first_spike_steps: str | tuple[int, int] | None = "auto",
    second_spike_steps: str | tuple[int, int] | None = "auto", example: str | None = None,
) -> dict:  # fmt: skip
    """Analyse the run in `run_dir` (final checkpoint, or the snapshot at `step`) and, with
    `dynamics`, every `every`-th snapshot; write analysis.json, summary.md and the figures
    (`fmt`: png, pdf or svg) to `out_dir`. Returns the analysis.json content.

    `first_spike_steps` / `second_spike_steps`: the two snapshots compared around each spike
    (Figure 8, Figures 9c / 9d): (A, B), "auto" (from the detected phases, when snapshots
    bracket the spike) or None (skip). `example`: the Figure-8 sequence in token form."""
    run_dir = RunDir(run_dir).require_run()
    cfg = run_dir.read_two_layer_config("analyze")
    task = cfg.task
    seed = cfg.seed if seed is None else seed
    out_dir = Path(run_dir.analysis_dir(step) if out_dir is None else out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with torch_threads(threads):
        checked = _checked_inputs(run_dir, cfg, step, first_spike_steps, second_spike_steps,
                                  example)  # fmt: skip
        data = make_probe_data(task, seed, n=n_probe)
        numbers, raw = analyze_model(checked.model, task, data, checked.held_out, seed)
        history = None
        if dynamics and run_dir.snapshots():
            history = progress_over_training(run_dir.path, data, every=every, progress=progress)
        first_cmp, second_cmp = _spike_comparisons(run_dir, data, checked.compare, example)
        result = analysis_json(
            run_dir=run_dir, model_path=checked.model_path, model_step=checked.model_step,
            seed=seed, task=task, data=data, numbers=numbers, records=checked.records,
            set_sizes=checked.set_sizes, phases=checked.phases, history=history,
            plateau=phase2_levels(history, checked.phases), compare=checked.compare,
            first_cmp=first_cmp, second_cmp=second_cmp,
        )  # fmt: skip
        if figures:
            label = run_dir.label(cfg)
            result["figures"] = write_figures(
                out_dir, cfg, checked.model_step, raw, history, checked.records, checked.phases,
                fmt, label,
            )  # fmt: skip
            result["figures"] += write_spike_figures(out_dir, first_cmp, second_cmp, fmt, label)
    result["seconds"] = round(time.perf_counter() - t_start, 2)
    atomic_write_bytes(out_dir / RunDir.ANALYSIS_JSON, json.dumps(result, indent=1).encode())
    atomic_write_bytes(out_dir / RunDir.SUMMARY_MD, summary_markdown(result).encode())
    return result
