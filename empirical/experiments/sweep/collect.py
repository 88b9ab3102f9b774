"""A sweep's results from its member directories: a row per member (its final evaluation, or
its evaluation at a given step), summarized by empirical.experiments.sweep.results.summarize."""

from __future__ import annotations

from empirical.experiments.sweep.metrics import MetricWeights, aux_metrics, metric_value
from empirical.experiments.sweep.results import summarize
from empirical.experiments.sweep.spec import Member, SweepSpec
from empirical.report.stats import accuracy_intervals
from empirical.runs.rundir import RunDir, SweepDir
from empirical.train.summary import eval_set_sizes


def collect_results(members: list[Member], spec: SweepSpec, out: SweepDir, metric: str,
                    title: str, command, at_step: int | None = None) -> dict:  # fmt: skip
    """The results of the finished members (their final evaluation), or with `at_step` of
    every member whose metrics.jsonl has an evaluation at that step (finished or not)."""
    rows, missing, stopped = [], [], {}
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
        rows.append(member_row(m, run, spec, metric, *found))
    return summarize(rows, param=spec.param, x_label=spec.x_label(), metric=metric,
                     target=spec.target, missing=missing, title=title, command=command,
                     stopped=stopped)  # fmt: skip


def member_row(m: Member, run: RunDir, spec: SweepSpec, metric: str, step: int, acc: dict) -> dict:
    """One member's row of results.json: its metric (and the secondary ones) at evaluation
    `step` with accuracies `acc`, with binomial intervals where the sets' sizes are known."""
    weights = MetricWeights(m.cfg)
    try:
        intervals = accuracy_intervals(acc, _set_sizes(run))
    except ImportError:  # no scipy: accuracies without their intervals
        intervals = {}
    row = {
        "member": m.dirname, "value": m.value, "x": spec.x_value(m.value), "seed": m.seed,
        "final_step": step, "metric": metric_value(metric, acc, weights),
        "aux": {a: metric_value(a, acc, weights) for a in aux_metrics(metric)},
        "pair_weight": weights.pair, "final_acc": acc,
        "final_ci": intervals,  # per set: n, correct, binomial (Wilson) 95% interval
    }  # fmt: skip
    if metric in intervals:  # the metric is one evaluation set: its interval
        got = intervals[metric]
        row |= {"metric_n": got["n"], "metric_correct": got["correct"], "metric_ci": got["ci95"]}
    return row


def _member_evaluation(run: RunDir, steps: int, at_step: int | None) -> tuple[int, dict] | None:
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


def _set_sizes(run: RunDir) -> dict[str, int]:
    """Sequences per evaluation set: from eval_sets.pt, else from summary.json (a member
    directory copied without its evaluation sets), else unknown ({}: no intervals)."""
    sizes = eval_set_sizes(run)
    if not sizes and run.summary.exists():
        sizes = dict(run.read_summary().get("eval_set_sizes") or {})
    return sizes
