"""(c) When the codes appear in training, against the spikes (docs/heads.md): the form probe
of `probe.py` (trained on the training sequences' codes of that snapshot, scored on the
held-out compositions) at every `every`-th snapshot of a run, beside the run's accuracies
(metrics.jsonl) and its two jumps (summary.json's phases). The codes "appear" at the first
snapshot from which the probe's mean accuracy over the held-out sets stays >= GOAL.
"""

from __future__ import annotations

from collections.abc import Callable

from tqdm.auto import tqdm

from empirical.analysis.codes.extract import TARGETS, answer_codes, features, targets
from empirical.analysis.codes.probe import GOAL, HELD_OUT_SETS, fit_and_score
from empirical.model.checkpoint import load_model
from empirical.runs.rundir import RunDir
from empirical.task.batch import Batch


def stays_from(steps: list[int], values: list[float | None], threshold: float) -> int | None:
    """The first step from which every later value is >= threshold (None: never)."""
    found = None
    for step, value in zip(reversed(steps), reversed(values), strict=True):
        if value is None or value < threshold:
            break
        found = step
    return found


def codes_over_training(run: RunDir, train: Batch, sets: dict[str, Batch], every: int = 1,
                        progress: bool = False,
                        log: Callable[[str], None] | None = None) -> dict:  # fmt: skip
    """The form probe's accuracy per set at every `every`-th snapshot (the last included),
    the mean over the held-out sets, and the step the codes appear (module docstring)."""
    snaps = run.snapshots()
    chosen = snaps[::every]
    if snaps and chosen[-1] != snaps[-1]:
        chosen.append(snaps[-1])
    y_train = targets(train)["form"]
    y_sets = {n: targets(b)["form"] for n, b in sets.items()}
    steps, per_set = [], {n: [] for n in sets}
    for step, path in tqdm(chosen, desc="codes over training", disable=not progress):
        model = load_model(path)
        X_train = features(answer_codes(model, train.tokens)[0])
        tests = {n: (features(answer_codes(model, b.tokens)[0]), y_sets[n])
                 for n, b in sets.items()}  # fmt: skip
        acc = fit_and_score(X_train, y_train, tests, TARGETS["form"][0])
        steps.append(step)
        for n in sets:
            per_set[n].append(acc[n])
        if log:
            log(f"  step {step}: form probe {_mean(acc)}")
    held = [n for n in HELD_OUT_SETS if n in sets]
    mean = [_mean({n: per_set[n][i] for n in held}) for i in range(len(steps))]
    return {"steps": steps, "per_set": per_set, "held_out_mean": mean, "held_out_sets": held,
            "appears_step": stays_from(steps, mean, GOAL), "goal": GOAL}  # fmt: skip


def _mean(acc: dict) -> float | None:
    values = [v for v in acc.values() if v is not None]
    return sum(values) / len(values) if values else None
