"""A parameter sweep (Figure 3): one run-config field swept over values, every value trained
for each seed (the grid whose variants are `param=value`, trained by runner.run_members or as
jobs), and the metric against the swept value summarized with its threshold. The sweep
directory: docs/sweep.md, "Outputs".

    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from empirical.experiments.sweep.cluster import submit_members
from empirical.experiments.sweep.collect import collect_results
from empirical.experiments.sweep.metrics import (
    MetricWeights,
    metric_value,
    resolve_metric,
    with_metric_sets,
)
from empirical.experiments.sweep.results import results_report
from empirical.experiments.sweep.runner import RunOutcome, run_members, sweep_dir_lock
from empirical.experiments.sweep.spec import (
    Member,
    SweepSpec,
    default_sweep_dir,
    expand_members,
    sweep_to_toml,
)
from empirical.experiments.sweep.summary_md import fmt_x, threshold_sentence
from empirical.report.files import atomic_write_bytes
from empirical.report.writer import write_report
from empirical.runs.config import RunConfig
from empirical.runs.rundir import SweepDir


@dataclass
class SweepOutcome(RunOutcome):
    """What run_sweep did: the members (as run_members says), the directory, the results."""

    sweep_dir: Path | None = None
    results: dict = field(default_factory=dict)
    submission: Any = None  # with an executor: what cluster.submit_members did


def run_sweep(
    base: RunConfig, spec: SweepSpec, sweep_dir: str | Path | None = None, *,
    progress: bool = True, log: Callable[[str], None] | None = print, stop_at: int | None = None,
    train: bool = True, command: str | None = None, executor=None, at_step: int | None = None,
    member_figures: bool = True,
) -> SweepOutcome:  # fmt: skip
    """Train every unfinished member (batched), then write results.json, summary.md and the
    figure. stop_at: each batch ends after that step (tests: as if killed there).
    train=False: only (re)write the summary from the finished members; with `at_step`, of
    every member's evaluation at that step (results_step_NNNNNN.json, summary_step_NNNNNN.md,
    NAME_step_NNNNNN.png). executor (cluster.ExecutorOptions): train each batch as a job; the
    summary is written when the jobs are waited for (else later, with train=False). Writes
    under the sweep directory's writer lock (sweep_dir_lock) and the members' (run_members).
    member_figures=False: the members trained here write no training_curves.png."""
    if at_step is not None and train:
        raise ValueError("at_step summarizes an earlier evaluation: only with train=False")
    out = SweepDir(sweep_dir if sweep_dir is not None else default_sweep_dir(base))
    with sweep_dir_lock(out, train):
        return _run_sweep(
            base, spec, out, progress=progress, log=log, stop_at=stop_at, train=train,
            command=command, executor=executor, at_step=at_step, member_figures=member_figures,
        )  # fmt: skip


def _run_sweep(
    base: RunConfig, spec: SweepSpec, out: SweepDir, *, progress: bool,
    log: Callable[[str], None] | None, stop_at: int | None, train: bool, command: str | None,
    executor, at_step: int | None, member_figures: bool = True,
) -> SweepOutcome:  # fmt: skip
    say = log or (lambda _text: None)
    metric = resolve_metric(spec.metric, spec.param)
    with_sets = with_metric_sets(base, metric)
    if with_sets is not base:
        say(f"metric {metric}: added to task.extra_eval_sets (built for every member)")
        base = with_sets
    members = expand_members(base, spec)
    announce = _announcer(base, spec, out, members, metric, say)
    sub = None
    if not train:
        ran = run_members(members, out, spec.max_batch, log=say, train=False)
    elif executor is not None:
        announce(run_members(members, out, spec.max_batch, log=say, train=False))
        sub = submit_members(members, out, spec.max_batch, executor, log=say, metric=metric,
                             name=base.name, figures=member_figures)  # fmt: skip
        ran = RunOutcome(sub.skipped, sub.stopped, sub.resumed, sub.fresh, sub.batches)
        if not sub.waited:
            say("when the jobs have finished, gather the summary: the same command with "
                "--summarize instead of --executor")
            return SweepOutcome(**vars(ran), sweep_dir=out.path, submission=sub)
    else:
        weights = {m.dirname: MetricWeights(m.cfg) for m in members}
        ran = run_members(
            members, out, spec.max_batch, progress=progress, log=say, stop_at=stop_at,
            labels=lambda m: f"{fmt_x(spec.x_value(m.value))}/s{m.seed}",
            metric=lambda m, acc: metric_value(metric, acc, weights[m.dirname]),
            metric_name=metric, announce=announce, figures=member_figures,
        )  # fmt: skip
    outcome = SweepOutcome(**vars(ran), sweep_dir=out.path, submission=sub)
    outcome.results = _summarize(base, spec, members, out, metric, command, train, at_step, say)
    return outcome


def _announcer(
    base: RunConfig, spec: SweepSpec, out: SweepDir, members: list[Member], metric: str,
    say: Callable[[str], None],
) -> Callable[[RunOutcome], None]:  # fmt: skip
    """What the sweep does once every member directory is checked (the plan) and before
    anything trains: sweep.toml written, the plan said."""

    def announce(plan: RunOutcome) -> None:
        out.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out.sweep_toml, sweep_to_toml(base, spec).encode())
        say(f"sweep {base.name}: {len(members)} members ({len(spec.values)} values x "
            f"{len(spec.seeds)} seeds) in {out}: {len(plan.skipped)} finished "
            f"(skipped), {len(plan.resumed)} resuming, {len(plan.fresh)} new; "
            f"{len(plan.batches)} batch(es); metric {metric}")

    return announce


def _summarize(
    base: RunConfig, spec: SweepSpec, members: list[Member], out: SweepDir, metric: str,
    command: str | None, train: bool, at_step: int | None, say: Callable[[str], None],
) -> dict:  # fmt: skip
    """The sweep's results from its member directories, written as results.json, summary.md
    and the figure when the sweep trained or has members (a summary keeps the command that
    trained the sweep)."""
    title = _title(spec, metric, base, at_step)
    if not train and at_step is None and out.results_json.exists():  # keep the training command
        try:
            command = json.loads(out.results_json.read_text()).get("command") or command
        except (json.JSONDecodeError, OSError):
            pass
    results = collect_results(members, spec, out, metric, title, command, at_step)
    if at_step is not None:
        results["at_step"] = at_step
    if train or out.members_dir.exists():
        paths = write_report(results_report(results, base.name, at_step), out.path)
        say(threshold_sentence(results))
        say(f"wrote {', '.join(map(str, paths.values()))}")
    return results


def _title(spec: SweepSpec, metric: str, base: RunConfig, at_step: int | None = None) -> str:
    kind = metric.split("/")[0]
    what = {"0var": "0-var accuracy", "1var": "1-var accuracy", "2var": "2-var accuracy"}
    when = f"after {base.train.steps} steps"
    accuracy = what.get(kind, "final accuracy")
    if at_step is not None:
        when = f"at step {at_step} of {base.train.steps}"
        accuracy = what.get(kind, "accuracy")
    seeds = f"{len(spec.seeds)} seed{'s' if len(spec.seeds) != 1 else ''}"
    return (f"{base.name}: {accuracy} ({metric}) {when}\n"
            f"vs {spec.short_name} (p = {base.task.n_classes}, {seeds})")
