"""Run a sweep: plan (skip finished members, resume unfinished ones), train in batches,
summarize.

    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")

Sweep directory:
    sweep.toml              the resolved sweep (base run config + [sweep] table)
    members/<param>=<value>_seed<s>/   one standard run directory per member (see trainer.py)
    results.json            per member and per swept value (mean, std, min, max), threshold
    summary.md              the same as a table, with the threshold sentence and the figure
    <name>.png              the Figure-3 panel: metric vs swept value, band over seeds
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from empirical.config_io import ConfigError, atomic_write_bytes
from empirical.run_config import RunConfig, load_run_config
from empirical.sweep.results import (
    MetricWeights,
    aux_metrics,
    metric_value,
    resolve_metric,
    summarize,
    threshold_sentence,
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


def default_sweep_dir(base: RunConfig) -> Path:
    return Path("runs") / "sweep" / base.name


def member_status(member: Member, run_dir: Path) -> tuple[str, int]:
    """('finished' | 'stopped' | 'resume' | 'fresh', checkpoint step) of a member's
    directory ('stopped': its loss became non-finite; it is not trained again)."""
    config_path = run_dir / "config.toml"
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
    summary = run_dir / "summary.json"
    if step == steps and summary.exists():
        if json.loads(summary.read_text()).get("final_step") == steps:
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
    members: list[Member], spec: SweepSpec, sweep_dir: Path, metric: str, title: str, command
) -> dict:
    rows, missing, stopped = [], [], {}
    aux = aux_metrics(metric)
    for m in members:
        stop = member_stopped(sweep_dir / "members" / m.dirname)
        if stop is not None:
            stopped[m.dirname] = stop["reason"]
            continue
        summary_path = sweep_dir / "members" / m.dirname / "summary.json"
        if not summary_path.exists():
            missing.append(m.dirname)
            continue
        summary = json.loads(summary_path.read_text())
        if summary.get("final_step") != m.cfg.train.steps:
            missing.append(m.dirname)
            continue
        acc = summary["final_acc"]
        weights = MetricWeights(m.cfg)
        rows.append(
            {
                "member": m.dirname,
                "value": m.value,
                "x": spec.x_value(m.value),
                "seed": m.seed,
                "final_step": summary["final_step"],
                "metric": metric_value(metric, acc, weights),
                "aux": {a: metric_value(a, acc, weights) for a in aux},
                "pair_weight": weights.pair,
                "final_acc": acc,
            }
        )
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
) -> SweepOutcome:
    """Train every unfinished member (batched), then write results.json, summary.md and the
    figure. stop_at: each batch ends after that step (tests: as if killed there).
    train=False: only (re)write the summary from the finished members."""
    say = log or (lambda _text: None)
    sweep_dir = Path(sweep_dir) if sweep_dir is not None else default_sweep_dir(base)
    members = expand_members(base, spec)
    metric = resolve_metric(spec.metric, spec.param)
    outcome = SweepOutcome(sweep_dir, {})
    statuses = {}
    for m in members:
        statuses[m.dirname] = member_status(m, sweep_dir / "members" / m.dirname)
    for m in members:
        status, _ = statuses[m.dirname]
        {
            "finished": outcome.skipped,
            "stopped": outcome.stopped,
            "resume": outcome.resumed,
            "fresh": outcome.fresh,
        }[status].append(m.dirname)
    for name in outcome.stopped:
        say(f"{name}: not trained: {member_stopped(sweep_dir / 'members' / name)['reason']}")
    todo = [m for m in members if statuses[m.dirname][0] in ("resume", "fresh")]
    starts = {m.dirname: statuses[m.dirname][1] for m in todo}
    batches = plan_batches(todo, starts, spec.max_batch)
    outcome.batches = [[m.dirname for m in b] for b in batches]
    if train:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(sweep_dir / "sweep.toml", sweep_to_toml(base, spec).encode())
        say(
            f"sweep {base.name}: {len(members)} members ({len(spec.values)} values x "
            f"{len(spec.seeds)} seeds) in {sweep_dir}: {len(outcome.skipped)} finished "
            f"(skipped), {len(outcome.resumed)} resuming, {len(outcome.fresh)} new; "
            f"{len(batches)} batch(es); metric {metric}"
        )
        if len(batches) > 1:
            diff = describe_key_difference(batches[0][0].cfg, batches[-1][0].cfg)
            if diff:
                say(f"  members differ in {', '.join(diff)}: batched separately")
        for i, batch in enumerate(batches):
            step0 = starts[batch[0].dirname]
            say(
                f"batch {i + 1}/{len(batches)}: {len(batch)} members from step {step0} to "
                f"{batch[0].cfg.train.steps}: {', '.join(m.dirname for m in batch)}"
            )
            weights = [MetricWeights(m.cfg) for m in batch]
            short = [_short_label(m, spec) for m in batch]

            def on_eval(step, records, batch=batch, weights=weights, short=short):
                if progress:
                    return
                text = ", ".join(
                    f"{s} {metric_value(metric, r['acc'], w):.3f}"
                    for s, r, w in zip(short, records, weights, strict=True)
                )
                say(f"  step {step}: {metric}: {text}")

            t0 = time.perf_counter()
            records = train_batch(
                [(m.cfg, sweep_dir / "members" / m.dirname) for m in batch],
                progress=progress,
                stop_at=stop_at,
                on_eval=on_eval,
                labels=short,
                metric=lambda j, acc, weights=weights: metric_value(metric, acc, weights[j]),
            )
            for m, r, w in zip(batch, records, weights, strict=True):
                stop = member_stopped(sweep_dir / "members" / m.dirname)
                if stop is not None:
                    outcome.stopped.append(m.dirname)
                    say(f"  {m.dirname}: stopped: {stop['reason']}")
                    continue
                say(
                    f"  {m.dirname}: step {r['step']}, {metric} "
                    f"{100 * metric_value(metric, r['acc'], w):.2f}%"
                )
            say(f"  batch {i + 1} took {time.perf_counter() - t0:.0f} s")
            if stop_at is not None and any(
                r["step"] < m.cfg.train.steps
                for m, r in zip(batch, records, strict=True)
                if m.dirname not in outcome.stopped
            ):
                outcome.stopped_early = True
    title = _title(spec, metric, base)
    previous = sweep_dir / "results.json"
    if not train and previous.exists():  # --summarize keeps the command that trained
        try:
            command = json.loads(previous.read_text()).get("command") or command
        except (json.JSONDecodeError, OSError):
            pass
    outcome.results = collect_results(members, spec, sweep_dir, metric, title, command)
    if train or (sweep_dir / "members").exists():
        figure = f"{base.name}.png"
        json_path, md_path, fig_path = write_results(outcome.results, sweep_dir, figure)
        say(threshold_sentence(outcome.results))
        say(f"wrote {json_path}, {md_path}, {fig_path}")
    return outcome


def _short_label(m: Member, spec: SweepSpec) -> str:
    x = spec.x_value(m.value)
    text = f"{x:g}" if isinstance(x, float) else str(x)
    return f"{text}/s{m.seed}"


def _title(spec: SweepSpec, metric: str, base: RunConfig) -> str:
    kind = metric.split("/")[0]
    what = {"0var": "0-var", "1var": "1-var", "2var": "2-var"}.get(kind, "final")
    return (
        f"{base.name}: {what} accuracy ({metric}) after {base.train.steps} steps\n"
        f"vs {spec.short_name} (p = {base.task.p}, {len(spec.seeds)} seeds)"
    )
