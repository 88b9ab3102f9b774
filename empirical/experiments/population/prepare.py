"""What each member needs before its claims can be counted, done where it is missing (outputs
newer than the final model are kept): analysis.json as `analyze --no-dynamics --no-figures`
writes it, and compare-qk across the first spike only (`compare_qk_spike1/`; a full
`compare_qk/` with a `spike1` window is used as it is). Docs: docs/populations.md, "What each
member needs". Each member is written under its writer lock; one another process writes is
left out, with a note.

    prepare_members(members, jobs=4)                   # all of them, in 4 processes
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from disentangled.errors import UserError
from empirical.analysis.run_analysis import analyze_run
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.outputs import report
from empirical.bridge.compare_qk.run_comparison import compare_run
from empirical.experiments.population.members import Member, existing_spike, read_analysis
from empirical.experiments.population.quantities import spike_numbers
from empirical.report.writer import write_report
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import RunDir


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def spike_window(summary: dict, snapshot_steps: list[int]) -> tuple[list[int], tuple] | str:
    """(snapshot steps to analyse, ("spike1", lo, hi)) for compare-qk across the first spike:
    lo the last snapshot at or before its jump's start, hi the first at or after its end, the
    steps every snapshot in [lo, hi). A string says why there is none."""
    rise = (summary.get("phases") or {}).get("first_spike")
    if not rise:
        return "no first spike detected"
    a = rise.get("jump_start_step", rise["start_step"])
    b = rise.get("jump_end_step", rise["end_step"])
    before = [s for s in snapshot_steps if s <= a]
    after = [s for s in snapshot_steps if s >= b]
    if not before or not after:
        return f"no snapshots on both sides of the first spike's jump ({a} -> {b})"
    lo, hi = before[-1], after[0]
    return [s for s in snapshot_steps if lo <= s < hi], ("spike1", lo, hi)


def analyse_member(run: RunDir) -> dict:
    """analysis.json of the member's final model, written as `analyze --no-dynamics
    --no-figures` without the spike comparisons writes it."""
    return analyze_run(run.path, dynamics=False, figures=False, first_spike_steps=None,
                       second_spike_steps=None, threads=None)  # fmt: skip


def compare_spike(run: RunDir, summary: dict) -> dict | str:
    """compare-qk of the member across its first spike (written to compare_qk_spike1/);
    returns its spike numbers, or why there are none."""
    plan = spike_window(summary, run.snapshot_steps())
    if isinstance(plan, str):
        return plan
    steps, window = plan
    opts = Options(steps=steps, windows=[window], one_step=False, progress=False)
    result = compare_run(run.path, opts)
    write_report(report(result), run.compare_qk_spike1_dir, figures=False)
    return spike_numbers(result) or "compare-qk found no update across the first spike"


def prepare_member(path, analysis: bool = True, theory: bool = True) -> tuple:
    """(analysis.json content or None, spike numbers or None, notes) of one finished member,
    computing what is missing under the member's writer lock. Module-level: it runs in the
    worker processes of prepare_members."""
    run = RunDir(path)
    notes: list[str] = []
    found = read_analysis(run) if analysis else None
    spike = existing_spike(run) if theory else None
    need_analysis = analysis and found is None
    need_spike = theory and spike is None
    if not (need_analysis or need_spike):
        return found, spike, notes
    summary = _read_json(run.summary) or {}
    try:
        with writer_lock(run):
            if need_analysis:
                try:
                    found = analyse_member(run)
                except UserError as exc:
                    notes.append(f"analysis failed: {exc}")
            if need_spike:
                try:
                    got = compare_spike(run, summary)
                except UserError as exc:
                    got = f"compare-qk failed: {exc}"
                if isinstance(got, str):
                    notes.append(got)
                else:
                    spike = got
    except UserError as exc:  # another writer holds it, or it cannot be written here
        notes.append(f"not analysed: {exc}")
    return found, spike, notes


def _worker_init() -> None:  # one torch thread per process: the processes share the cores
    torch.set_num_threads(1)


def prepare_members(
    members: list[Member], jobs: int = 1, analysis: bool = True, theory: bool = True,
    log: Callable[[str], None] | None = None,
) -> None:  # fmt: skip
    """Fill in each member's analysis, spike numbers and notes (prepare_member), in `jobs`
    processes (1: in this one)."""
    say = log or (lambda _text: None)
    if not members or not (analysis or theory):
        return
    paths = [str(m.path) for m in members]
    if jobs <= 1:
        results = []
        for i, p in enumerate(paths):
            results.append(prepare_member(p, analysis, theory))
            say(f"  {members[i].name}: prepared ({i + 1}/{len(paths)})")
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(paths)), mp_context=ctx,
                                 initializer=_worker_init) as pool:  # fmt: skip
            futures = [pool.submit(prepare_member, p, analysis, theory) for p in paths]
            results = []
            for i, f in enumerate(futures):
                results.append(f.result())
                say(f"  {members[i].name}: prepared ({i + 1}/{len(paths)})")
    for m, (found, spike, notes) in zip(members, results, strict=True):
        m.analysis, m.spike, m.notes = found, spike, list(notes)
