"""The one runner of the members of sweeps, grids and cluster jobs (`run_members`): classify
each member's directory (finished, stopped, resume, fresh; one holding another config is a
SweepError, never overwritten), batch the rest by batch key and start step, train each batch.

    outcome = run_members(members, SweepDir("runs/sweep/pairs"), max_batch=0)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from empirical.config.io import ConfigError
from empirical.experiments.sweep.spec import Member, batch_key, describe_key_difference
from empirical.experiments.sweep.trainer import member_step, member_stopped, train_batch
from empirical.runs.config import load_run_config
from empirical.runs.lock import writer_lock, writer_locks
from empirical.runs.rundir import RunDir, RunDirError, SweepDir
from empirical.train.loop import resume_view, steps_change_refusal


class SweepError(ConfigError):
    """A sweep directory that cannot be used with this sweep (a member holds another config)."""


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
        raise SweepError(f"member directory {run_dir} holds a run with a different config; use "
                         "another sweep directory (--out) or remove that member directory")
    refusal = steps_change_refusal(existing, member.cfg)
    if refusal:
        raise SweepError(f"member {run_dir.name}: {refusal}")
    step = member_step(run_dir)
    if member_stopped(run_dir) is not None:
        return "stopped", step
    steps = member.cfg.train.steps
    if step > steps:
        raise SweepError(f"member {run_dir.name} has trained {step} steps, more than "
                         f"train.steps = {steps}")
    if step == steps and run.summary.exists():
        try:
            final = run.read_summary().get("final_step")
        except RunDirError:  # unreadable: a resume at the last step writes it again
            final = None
        if final == steps:
            return "finished", step
    return ("resume", step) if step > 0 else ("fresh", 0)


def plan_batches(members: list[Member], starts: dict[str, int],
                 max_batch: int) -> list[list[Member]]:  # fmt: skip
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
    members: list[Member], out: SweepDir, max_batch: int, *, progress: bool = True,
    log: Callable[[str], None] = print, stop_at: int | None = None, train: bool = True,
    labels: Callable[[Member], str] = lambda m: m.dirname,
    metric: Callable[[Member, dict], float] | None = None, metric_name: str = "",
    announce: Callable[[RunOutcome], None] | None = None, figures: bool = True,
) -> RunOutcome:  # fmt: skip
    """Classify every member's directory, batch the rest (at most max_batch each) and train
    each batch with `train_batch`. train=False: only classify. announce(plan): called once
    every directory is classified, before anything trains. Training holds every member's
    writer lock (empirical.runs.lock), taken before the first check; a member another process
    writes is left to it: logged, listed in `busy`, not trained here. figures=False: the
    members write no training_curves.png."""
    if not train:
        outcome = RunOutcome()
        classify(members, out, max_batch, outcome, log)
        return outcome
    with writer_locks([out.member(m.dirname) for m in members], skip_busy=True) as held_elsewhere:
        busy = [m.dirname for m in members if out.member(m.dirname).path in held_elsewhere]
        for name in busy:
            log(f"{name}: not trained here: {held_elsewhere[out.member(name).path]}")
        outcome = RunOutcome(busy=busy)
        mine = [m for m in members if m.dirname not in busy]
        batches, starts = classify(mine, out, max_batch, outcome, log)
        if announce is not None:
            announce(outcome)
        if len(batches) > 1:
            diff = describe_key_difference(batches[0][0].cfg, batches[-1][0].cfg)
            if diff:
                log(f"  members differ in {', '.join(diff)}: batched separately")
        trainer = _BatchTrainer(out, outcome, progress, log, stop_at, labels, metric, metric_name,
                                figures)  # fmt: skip
        for i, batch in enumerate(batches):
            log(f"batch {i + 1}/{len(batches)}: {len(batch)} members from step "
                f"{starts[batch[0].dirname]} to {batch[0].cfg.train.steps}: "
                f"{', '.join(m.dirname for m in batch)}")
            trainer.train(batch)
            log(f"  batch {i + 1} took {outcome.timings[-1]['seconds']:.0f} s")
        return outcome


def classify(
    members: list[Member], out: SweepDir, max_batch: int, outcome: RunOutcome,
    log: Callable[[str], None],
) -> tuple[list[list[Member]], dict[str, int]]:  # fmt: skip
    """Each member's status into `outcome` (skipped, stopped, resumed, fresh, batches);
    returns the batches to train and each member's start step."""
    statuses = {m.dirname: member_status(m, out.member(m.dirname).path) for m in members}
    lists = {"finished": outcome.skipped, "stopped": outcome.stopped, "resume": outcome.resumed,
             "fresh": outcome.fresh}  # fmt: skip
    for m in members:
        lists[statuses[m.dirname][0]].append(m.dirname)
    for name in outcome.stopped:
        log(f"{name}: not trained: {out.member(name).read_stopped()['reason']}")
    todo = [m for m in members if statuses[m.dirname][0] in ("resume", "fresh")]
    starts = {m.dirname: statuses[m.dirname][1] for m in todo}
    batches = plan_batches(todo, starts, max_batch)
    outcome.batches = [[m.dirname for m in b] for b in batches]
    return batches, starts


@dataclass
class _BatchTrainer:
    """Trains one planned batch after another (`train_batch`), logging its progress (without
    a progress bar: a line per evaluation with each member's `metric`) and each member's end
    into the outcome."""

    out: SweepDir
    outcome: RunOutcome
    progress: bool
    log: Callable[[str], None]
    stop_at: int | None
    labels: Callable[[Member], str]
    metric: Callable[[Member, dict], float] | None
    metric_name: str
    figures: bool = True

    def train(self, batch: list[Member]) -> None:
        short = [self.labels(m) for m in batch]
        t0 = time.perf_counter()
        metric = self.metric
        records = train_batch(
            [(m.cfg, self.out.member(m.dirname).path) for m in batch], progress=self.progress,
            stop_at=self.stop_at,
            on_eval=lambda step, records: self._on_eval(step, records, batch, short, t0),
            labels=short, metric=None if metric is None else (lambda j, acc: metric(batch[j], acc)),
            figures=self.figures,
        )  # fmt: skip
        for m, r in zip(batch, records, strict=True):
            self._member_ended(m, r)
        self.outcome.timings.append({"members": len(batch), "seconds": time.perf_counter() - t0})

    def _on_eval(self, step, records, batch, short, t0) -> None:
        if self.progress or self.metric is None:
            return
        text = ", ".join(f"{s} {self.metric(m, r['acc']):.3f}"
                         for s, m, r in zip(short, batch, records, strict=True) if r)
        self.log(f"  step {step} ({time.perf_counter() - t0:.0f} s): {self.metric_name}: {text}")

    def _member_ended(self, m: Member, record: dict) -> None:
        stop = self.out.member(m.dirname).read_stopped()
        if stop is not None:
            self.outcome.stopped.append(m.dirname)
            self.log(f"  {m.dirname}: stopped: {stop['reason']}")
        elif record and self.metric is not None:
            value = 100 * self.metric(m, record["acc"])
            self.log(f"  {m.dirname}: step {record['step']}, {self.metric_name} {value:.2f}%")
        if stop is None and record and record["step"] < m.cfg.train.steps:
            self.outcome.stopped_early = True


def sweep_dir_lock(out: SweepDir, train: bool):
    """The writer lock of a sweep or grid directory (empirical.runs.lock) for a call that
    writes there: one that trains, or summarizes members that exist; else a no-op."""
    if train or out.members_dir.exists():
        return writer_lock(out, "--out")
    return contextlib.nullcontext()
