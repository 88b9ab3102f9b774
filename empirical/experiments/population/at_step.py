"""A run as it was at step S: the run that `train.steps = S` would have made, written from a
longer (or stopped) run's evaluations, when its schedule makes the two the same run.

    python -m empirical at-step SRC [SRC ...] --step 8000 --out DIR

copies each run directory SRC into DIR/<its name> with train.steps = S in config.toml, the
metrics records of steps <= S, and the summary.json of a run that ended at S (its evaluation
sets' sizes from its eval_sets.pt, else rebuilt from the config; no checkpoints, snapshots or
figures). A population whose training stopped before its last step (a lent GPU's time ran
out) is then counted as the population of S steps it is (`claims --summarize --no-analysis`).
train.steps is not part of a run's fingerprint, and with a constant learning rate without
warm-up the first S steps of a longer run are exactly the run of S steps; any other schedule
depends on train.steps, so it is refused, as is a run without a full evaluation at S.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from empirical.config.io import ConfigError, save_config
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import build_eval_sets
from empirical.train.summary import eval_set_sizes, write_summary


def _refusal(cfg, step: int) -> str | None:
    tc = cfg.train
    if tc.lr_schedule != "constant" or tc.warmup_steps:
        return (f"train.lr_schedule = {tc.lr_schedule!r}, train.warmup_steps = {tc.warmup_steps}: "
                "the learning rate depends on train.steps, so its first steps are not the run "
                "of fewer steps; only a constant rate without warm-up can be cut")  # fmt: skip
    if step > tc.steps:
        return f"--step {step} is after the run's train.steps = {tc.steps}"
    return None


def run_at_step(src: str | Path, out: str | Path, step: int, sizes: dict | None = None) -> dict:
    """Write the run of `step` steps that SRC's first `step` steps are into OUT (a new
    directory); returns its summary. `sizes`: the evaluation sets' sizes (default: rebuilt
    from the config). A ConfigError names what forbids it."""
    run, out = RunDir(src), Path(out)
    if not run.is_run():
        raise ConfigError(f"{src}: not a run directory (no config.toml)")
    cfg = run.read_config()
    why = _refusal(cfg, step)
    if why:
        raise ConfigError(f"{src}: {why}")
    records = [r for r in run.read_metrics() if r["step"] <= step]
    last = records[-1] if records else None
    if last is None or last["step"] != step or "eval_n" in last:
        have = last["step"] if last else "none"
        raise ConfigError(f"{src}: no full evaluation at step {step} (its last record at or "
                          f"before it: {have}); choose a step the run fully evaluated")  # fmt: skip
    if out.exists():
        raise ConfigError(f"{out} exists: give an empty --out")
    cut = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=step))
    if sizes is None:  # the run's own sets when it kept them, else built again (the same)
        sizes = eval_set_sizes(run.path) or {
            name: len(batch) for name, batch in build_eval_sets(cfg.task, cfg.seed).items()}
    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_config(cut, tmp / RunDir.CONFIG)
        (tmp / RunDir.METRICS).write_text("".join(json.dumps(r) + "\n" for r in records))
        summary = write_summary(cut, tmp, records, sizes=sizes, figures=False)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-written stays
        raise
    tmp.rename(out)
    return summary
