"""Run a sweep or a grid: plan (skip finished members, resume unfinished ones), train in
batches, summarize.

    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")

`run_members` is the one runner: a grid's members are its variants x seeds, and a sweep is
the grid whose variants are `param=value` for each swept value (spec.expand_variants);
`run_sweep` and `grid.run_grid` differ only in what they summarize.

Sweep directory:
    sweep.toml              the resolved sweep (base run config + [sweep] table)
    members/<param>=<value>_seed<s>/   one standard run directory per member (see trainer.py)
    results.json            per member and per swept value (mean, std, min, max), threshold
    summary.md              the same as a table, with the threshold sentence and the figure
    <name>.png              the Figure-3 panel: metric vs swept value, band over seeds
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from empirical.config_io import ConfigError, atomic_write_bytes
from empirical.run_config import RunConfig, load_run_config
from empirical.run_lock import writer_lock, writer_locks
from empirical.rundir import RunDir, RunDirError, SweepDir
from empirical.stats import accuracy_intervals
from empirical.sweep.results import (
    MetricWeights,
    aux_metrics,
    metric_value,
    resolve_metric,
    summarize,
    threshold_sentence,
    with_metric_sets,
    write_results,
)
from empirical.sweep.spec import (
    Member,
    SweepSpec,
    batch_key,
    describe_key_difference,
    expand_members,
    sweep_to_toml,
)
from empirical.sweep.trainer import member_step, member_stopped, train_batch
from empirical.train.loop import resume_view, steps_change_refusal
from empirical.train.summary import eval_set_sizes


class SweepError(ConfigError):
    """A sweep directory that cannot be used with this sweep (a member holds another config)."""


@dataclass
class SweepOutcome:
    sweep_dir: Path
    results: dict
    skipped: list[str] = field(default_factory=list)  # finished before this call
    stopped: list[str] = field(default_factory=list)  # non-finite loss (stopped.json)
    resumed: list[str] = field(default_factory=list)  # continued from a checkpoint
    fresh: list[str] = field(default_factory=list)  # started from step 0
    batches: list[list[str]] = field(default_factory=list)  # members trained together
    stopped_early: bool = False
    submission: Any = None  # with an executor: what cluster.submit_members did
    busy: list[str] = field(default_factory=list)  # written by another process: not trained


def default_sweep_dir(base: RunConfig) -> Path:
    return Path("runs") / "sweep" / base.name


def member_status(member: Member, run_dir: Path) -> tuple[str, int]:
    """('finished' | 'stopped' | 'resume' | 'fresh', checkpoint step) of a member's
    directory ('stopped': its loss became non-finite; it is not trained again)."""
    run = RunDir(run_dir)
    config_path = run.config
    if not config_path.exists():
        return "fresh", 0
    try:
        existing = load_run_config(config_path)
    except ConfigError as exc:
        raise SweepError(f"{config_path} is not a readable run config: {exc}") from None
    if resume_view(existing) != resume_view(member.cfg):
        raise SweepError(
            f"member directory {run_dir} holds a run with a different config; use another "
            "sweep directory (--out) or remove that member directory"
        )
    refusal = steps_change_refusal(existing, member.cfg)
    if refusal:
        raise SweepError(f"member {run_dir.name}: {refusal}")
    step = member_step(run_dir)
    if member_stopped(run_dir) is not None:
        return "stopped", step
    steps = member.cfg.train.steps
    if step > steps:
        raise SweepError(
            f"member {run_dir.name} has trained {step} steps, more than train.steps = {steps}"
        )
    if step == steps and run.summary.exists():
        try:
            final = run.read_summary().get("final_step")
        except RunDirError:  # unreadable: a resume at the last step writes it again
            final = None
        if final == steps:
            return "finished", step
    return ("resume", step) if step > 0 else ("fresh", 0)


def plan_batches(
    members: list[Member], starts: dict[str, int], max_batch: int
) -> list[list[Member]]:
    """Members grouped by (batch_key, start step), in first-appearance order, each group cut
    into batches of at most max_batch (0: no limit)."""
    groups: dict[tuple[str, int], list[Member]] = {}
    for m in members:
        groups.setdefault((batch_key(m.cfg), starts[m.dirname]), []).append(m)
    batches = []
    for group in groups.values():
        size = max_batch or len(group)
        batches += [group[i : i + size] for i in range(0, len(group), size)]
    return batches


def collect_results(
    members: list[Member],
    spec: SweepSpec,
    out: SweepDir,
    metric: str,
    title: str,
    command,
    at_step: int | None = None,
) -> dict:
    """The results of the finished members (their final evaluation), or with `at_step` of
    every member whose metrics.jsonl has an evaluation at that step (finished or not)."""
    rows, missing, stopped = [], [], {}
    aux = aux_metrics(metric)
    for m in members:
        run = out.member(m.dirname)
        stop = run.read_stopped()
        if stop is not None:
            stopped[m.dirname] = stop["reason"]
            continue
        found = _member_evaluation(run, m.cfg.train.steps, at_step)
        if found is None:
            missing.append(m.dirname)
            continue
        step, acc = found
        weights = MetricWeights(m.cfg)
        try:
            intervals = accuracy_intervals(acc, _set_sizes(run))
        except ImportError:  # no scipy: accuracies without their intervals
            intervals = {}
        row = {
            "member": m.dirname,
            "value": m.value,
            "x": spec.x_value(m.value),
            "seed": m.seed,
            "final_step": step,
            "metric": metric_value(metric, acc, weights),
            "aux": {a: metric_value(a, acc, weights) for a in aux},
            "pair_weight": weights.pair,
            "final_acc": acc,
            "final_ci": intervals,  # per set: n, correct, binomial (Wilson) 95% interval
        }
        if metric in intervals:  # the metric is one evaluation set: its interval
            got = intervals[metric]
            row |= {"metric_n": got["n"], "metric_correct": got["correct"]}
            row["metric_ci"] = got["ci95"]
        rows.append(row)
    return summarize(
        rows,
        param=spec.param,
        x_label=spec.x_label(),
        metric=metric,
        target=spec.target,
        missing=missing,
        title=title,
        command=command,
        stopped=stopped,
    )


def _member_evaluation(run, steps: int, at_step: int | None) -> tuple[int, dict] | None:
    """(step, accuracies) of a member's final evaluation (summary.json, once it reached
    `steps`), or of its evaluation at `at_step` (metrics.jsonl); None: it has none."""
    if at_step is None:
        if not run.summary.exists():
            return None
        summary = run.read_summary()
        if summary.get("final_step") != steps:
            return None
        return summary["final_step"], summary["final_acc"]
    for record in run.read_metrics():
        if record["step"] == at_step:
            return at_step, record["acc"]
    return None


def _set_sizes(run) -> dict[str, int]:
    """Sequences per evaluation set: from eval_sets.pt, else from summary.json (a member
    directory copied without its evaluation sets), else unknown ({}: no intervals)."""
    sizes = eval_set_sizes(run)
    if not sizes and run.summary.exists():
        sizes = dict(run.read_summary().get("eval_set_sizes") or {})
    return sizes


@dataclass
class RunOutcome:
    """What one call of `run_members` did."""

    skipped: list[str] = field(default_factory=list)  # finished before this call
    stopped: list[str] = field(default_factory=list)  # diverged (stopped.json)
    resumed: list[str] = field(default_factory=list)  # continued from a checkpoint
    fresh: list[str] = field(default_factory=list)  # started from step 0
    batches: list[list[str]] = field(default_factory=list)  # members trained together
    timings: list[dict] = field(default_factory=list)  # per batch: members, seconds
    stopped_early: bool = False
    busy: list[str] = field(default_factory=list)  # written by another process: left to it


def run_members(
    members: list[Member],
    out: SweepDir,
    max_batch: int,
    *,
    progress: bool = True,
    log: Callable[[str], None] = print,
    stop_at: int | None = None,
    train: bool = True,
    labels: Callable[[Member], str] = lambda m: m.dirname,
    metric: Callable[[Member, dict], float] | None = None,
    metric_name: str = "",
    announce: Callable[[RunOutcome], None] | None = None,
) -> RunOutcome:
    """The one runner of sweeps and grids: classify every member's directory (finished,
    stopped, resume, fresh; a directory holding another config is an error), group the rest
    into batches (same batch key and start step, at most max_batch), and train each batch
    with `train_batch`. train=False: only classify. announce(plan): called once every
    directory is classified and before anything trains (so every check comes before the
    caller's first write).

    Training holds the writer lock of every member directory (empirical.run_lock), all
    taken before the first check and released at the end; a member another process is
    writing (a `train --resume` of it, another job) is left to it: logged, listed in
    `busy`, not trained here."""
    if not train:
        return _run_members(members, out, max_batch, RunOutcome(), train=False, log=log)
    with writer_locks([out.member(m.dirname) for m in members], skip_busy=True) as held_elsewhere:
        busy = [m.dirname for m in members if out.member(m.dirname).path in held_elsewhere]
        for name in busy:
            log(f"{name}: not trained here: {held_elsewhere[out.member(name).path]}")
        return _run_members(
            [m for m in members if m.dirname not in busy],
            out,
            max_batch,
            RunOutcome(busy=busy),
            progress=progress,
            log=log,
            stop_at=stop_at,
            labels=labels,
            metric=metric,
            metric_name=metric_name,
            announce=announce,
        )


def _run_members(
    members: list[Member],
    out: SweepDir,
    max_batch: int,
    outcome: RunOutcome,
    *,
    progress: bool = True,
    log: Callable[[str], None] = print,
    stop_at: int | None = None,
    train: bool = True,
    labels: Callable[[Member], str] = lambda m: m.dirname,
    metric: Callable[[Member, dict], float] | None = None,
    metric_name: str = "",
    announce: Callable[[RunOutcome], None] | None = None,
) -> RunOutcome:
    statuses = {m.dirname: member_status(m, out.member(m.dirname).path) for m in members}
    for m in members:
        status, _ = statuses[m.dirname]
        {
            "finished": outcome.skipped,
            "stopped": outcome.stopped,
            "resume": outcome.resumed,
            "fresh": outcome.fresh,
        }[status].append(m.dirname)
    for name in outcome.stopped:
        log(f"{name}: not trained: {out.member(name).read_stopped()['reason']}")
    todo = [m for m in members if statuses[m.dirname][0] in ("resume", "fresh")]
    starts = {m.dirname: statuses[m.dirname][1] for m in todo}
    batches = plan_batches(todo, starts, max_batch)
    outcome.batches = [[m.dirname for m in b] for b in batches]
    if not train:
        return outcome
    if announce is not None:
        announce(outcome)
    if len(batches) > 1:
        diff = describe_key_difference(batches[0][0].cfg, batches[-1][0].cfg)
        if diff:
            log(f"  members differ in {', '.join(diff)}: batched separately")
    for i, batch in enumerate(batches):
        log(
            f"batch {i + 1}/{len(batches)}: {len(batch)} members from step "
            f"{starts[batch[0].dirname]} to {batch[0].cfg.train.steps}: "
            f"{', '.join(m.dirname for m in batch)}"
        )
        short = [labels(m) for m in batch]
        t0 = time.perf_counter()

        def on_eval(step, records, batch=batch, short=short, t0=t0):
            if progress or metric is None:
                return
            text = ", ".join(
                f"{s} {metric(m, r['acc']):.3f}"
                for s, m, r in zip(short, batch, records, strict=True)
                if r
            )
            log(f"  step {step} ({time.perf_counter() - t0:.0f} s): {metric_name}: {text}")

        records = train_batch(
            [(m.cfg, out.member(m.dirname).path) for m in batch],
            progress=progress,
            stop_at=stop_at,
            on_eval=on_eval,
            labels=short,
            metric=None if metric is None else (lambda j, acc, b=batch: metric(b[j], acc)),
        )
        for m, r in zip(batch, records, strict=True):
            stop = out.member(m.dirname).read_stopped()
            if stop is not None:
                outcome.stopped.append(m.dirname)
                log(f"  {m.dirname}: stopped: {stop['reason']}")
            elif r and metric is not None:
                value = 100 * metric(m, r["acc"])
                log(f"  {m.dirname}: step {r['step']}, {metric_name} {value:.2f}%")
            if stop is None and r and r["step"] < m.cfg.train.steps:
                outcome.stopped_early = True
        outcome.timings.append({"members": len(batch), "seconds": time.perf_counter() - t0})
        log(f"  batch {i + 1} took {outcome.timings[-1]['seconds']:.0f} s")
    return outcome


def run_sweep(
    base: RunConfig,
    spec: SweepSpec,
    sweep_dir: str | Path | None = None,
    *,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
    stop_at: int | None = None,
    train: bool = True,
    command: str | None = None,
    executor=None,
    at_step: int | None = None,
) -> SweepOutcome:
    """Train every unfinished member (batched), then write results.json, summary.md and the
    figure. stop_at: each batch ends after that step (tests: as if killed there).
    train=False: only (re)write the summary from the finished members; with `at_step`, a
    summary of every member's evaluation at that step instead (results_step_NNNNNN.json,
    summary_step_NNNNNN.md, NAME_step_NNNNNN.png; members still training included).
    executor (cluster.ExecutorOptions): train each batch as a job instead; the summary is
    written when the jobs are waited for (else later, with train=False).

    The sweep directory's own files are written under its writer lock (sweep_dir_lock); the
    member directories under theirs (run_members; a member another process writes is left
    to it and missing from the summary)."""
    if at_step is not None and train:
        raise ValueError("at_step summarizes an earlier evaluation: only with train=False")
    out = SweepDir(sweep_dir if sweep_dir is not None else default_sweep_dir(base))
    with sweep_dir_lock(out, train):
        return _run_sweep(
            base, spec, out, progress=progress, log=log, stop_at=stop_at, train=train,
            command=command, executor=executor, at_step=at_step,
        )  # fmt: skip


def sweep_dir_lock(out: SweepDir, train: bool):
    """The writer lock of a sweep or grid directory (empirical.run_lock) for a call that
    writes there: one that trains, or summarizes members that exist; else a no-op."""
    if train or out.members_dir.exists():
        return writer_lock(out, "--out")
    return contextlib.nullcontext()


def _run_sweep(
    base: RunConfig,
    spec: SweepSpec,
    out: SweepDir,
    *,
    progress: bool,
    log: Callable[[str], None] | None,
    stop_at: int | None,
    train: bool,
    command: str | None,
    executor,
    at_step: int | None,
) -> SweepOutcome:
    say = log or (lambda _text: None)
    metric = resolve_metric(spec.metric, spec.param)
    with_sets = with_metric_sets(base, metric)
    if with_sets is not base:
        say(f"metric {metric}: added to task.extra_eval_sets (built for every member)")
        base = with_sets
    members = expand_members(base, spec)
    weights = {m.dirname: MetricWeights(m.cfg) for m in members}

    def announce(plan: RunOutcome) -> None:  # every member directory is checked by now
        out.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out.sweep_toml, sweep_to_toml(base, spec).encode())
        say(
            f"sweep {base.name}: {len(members)} members ({len(spec.values)} values x "
            f"{len(spec.seeds)} seeds) in {out}: {len(plan.skipped)} finished "
            f"(skipped), {len(plan.resumed)} resuming, {len(plan.fresh)} new; "
            f"{len(plan.batches)} batch(es); metric {metric}"
        )

    if not train or executor is not None:
        ran = run_members(members, out, spec.max_batch, log=say, train=False)
    if train:
        if executor is not None:
            announce(ran)
            from empirical.sweep.cluster import submit_members

            sub = submit_members(
                members, out, spec.max_batch, executor, log=say, metric=metric, name=base.name
            )
            ran = RunOutcome(sub.skipped, sub.stopped, sub.resumed, sub.fresh, sub.batches)
            if not sub.waited:
                say(
                    "when the jobs have finished, gather the summary: the same command with "
                    "--summarize instead of --executor"
                )
                return SweepOutcome(
                    out.path, {}, ran.skipped, ran.stopped, ran.resumed, ran.fresh,
                    ran.batches, submission=sub,
                )  # fmt: skip
        else:
            sub = None
            ran = run_members(
                members,
                out,
                spec.max_batch,
                progress=progress,
                log=say,
                stop_at=stop_at,
                labels=lambda m: _short_label(m, spec),
                metric=lambda m, acc: metric_value(metric, acc, weights[m.dirname]),
                metric_name=metric,
                announce=announce,
            )
    outcome = SweepOutcome(
        out.path,
        {},
        skipped=ran.skipped,
        stopped=ran.stopped,
        resumed=ran.resumed,
        fresh=ran.fresh,
        batches=ran.batches,
        stopped_early=ran.stopped_early,
        submission=sub if train else None,
        busy=ran.busy,
    )
    title = _title(spec, metric, base, at_step)
    if not train and at_step is None and out.results_json.exists():  # keep the training command
        try:
            command = json.loads(out.results_json.read_text()).get("command") or command
        except (json.JSONDecodeError, OSError):
            pass
    outcome.results = collect_results(members, spec, out, metric, title, command, at_step)
    if at_step is not None:
        outcome.results["at_step"] = at_step
    if train or out.members_dir.exists():
        json_path, md_path, fig_path = write_results(
            outcome.results, out.path, f"{base.name}.png", at_step
        )
        say(threshold_sentence(outcome.results))
        say(f"wrote {json_path}, {md_path}, {fig_path}")
    return outcome


def _short_label(m: Member, spec: SweepSpec) -> str:
    x = spec.x_value(m.value)
    text = f"{x:g}" if isinstance(x, float) else str(x)
    return f"{text}/s{m.seed}"


def _title(spec: SweepSpec, metric: str, base: RunConfig, at_step: int | None = None) -> str:
    kind = metric.split("/")[0]
    what = {"0var": "0-var accuracy", "1var": "1-var accuracy", "2var": "2-var accuracy"}
    when = f"after {base.train.steps} steps"
    accuracy = what.get(kind, "final accuracy")
    if at_step is not None:
        when = f"at step {at_step} of {base.train.steps}"
        accuracy = what.get(kind, "accuracy")
    seeds = f"{len(spec.seeds)} seed{'s' if len(spec.seeds) != 1 else ''}"
    return (
        f"{base.name}: {accuracy} ({metric}) {when}\n"
        f"vs {spec.short_name} (p = {base.task.p}, {seeds})"
    )
