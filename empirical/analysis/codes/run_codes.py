"""The codes of one run (`codes_of_run`) and over runs, by variant (`codes_of_runs`):
docs/heads.md, "Latent codes". One run: the form probe and its controls on the final model
(or a snapshot), the codes' structure, and (`timeline`) the probe over the snapshots against
the spikes; its numbers are `summary`'s. Over runs: per variant (model.attention and
model.n_heads), the median and range over the runs of each set's probe accuracy, and in how
many runs the probe reaches the goal on every held-out set the model itself reaches it on.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from scipy.stats import spearmanr

from disentangled.errors import UserError
from empirical.analysis.codes.extract import answer_codes
from empirical.analysis.codes.probe import GOAL, HELD_OUT_SETS, TRAINED_SETS, probe_forms
from empirical.analysis.codes.structure import code_structure
from empirical.analysis.codes.timeline import codes_over_training
from empirical.model.checkpoint import load_model
from empirical.runs.rundir import RunDir
from empirical.task.batch import Batch
from empirical.task.eval_sets import build_eval_sets
from empirical.task.pairs import derive_seed
from empirical.task.sampler import sample_training_batch

SETS = (*HELD_OUT_SETS, *TRAINED_SETS)


def _subsample(batch: Batch, n: int, seed: int, name: str) -> Batch:
    if len(batch) <= n:
        return batch
    gen = torch.Generator().manual_seed(derive_seed(seed, "codes", name))
    return batch[torch.randperm(len(batch), generator=gen)[:n]]


def run_data(run: RunDir, cfg, n_train: int, n_test: int, seed: int) -> tuple[Batch, dict]:
    """(training sequences of the trained forms, {set: at most n_test of its sequences}): the
    run's training distribution with its held-out pairs, and its evaluation sets."""
    sets = run.read_eval_sets(cfg) or build_eval_sets(cfg.task, cfg.seed)
    chosen = {n: _subsample(sets[n], n_test, seed, n) for n in SETS if n in sets}
    if not any(n in chosen for n in HELD_OUT_SETS) or not any(n in chosen for n in TRAINED_SETS):
        raise UserError(
            f"codes reads the assign-and-add evaluation sets ({', '.join(SETS)}); the run "
            f"{run.path} has {', '.join(sets) or 'none'}"
        )
    gen = torch.Generator().manual_seed(derive_seed(seed, "codes", "train"))
    train = sample_training_batch(cfg.task, n_train, gen, held_out=sets.held_out)
    return train, chosen


def model_accuracy(logits: torch.Tensor, batch: Batch) -> float:
    return (logits.argmax(-1) == batch.labels.cpu()).double().mean().item()


def codes_of_run(run_dir, step: int | None = None, n_train: int = 3000, n_test: int = 1000,
                 timeline: bool = True, every: int = 1, seed: int = 0, progress: bool = False,
                 log: Callable[[str], None] | None = None) -> dict:  # fmt: skip
    """Everything `codes` computes for one run (module docstring)."""
    say = log or (lambda _m: None)
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    train, sets = run_data(run, cfg, n_train, n_test, seed)
    model = load_model(run.model_path(step))
    say(f"{run.path}: codes at `=` of {len(train)} training sequences and {len(sets)} sets")
    codes_train, _ = answer_codes(model, train.tokens)
    out_sets = {n: answer_codes(model, b.tokens) for n, b in sets.items()}
    codes_sets = {n: c for n, (c, _) in out_sets.items()}
    init = None
    if 0 in run.snapshot_steps() and step != 0:
        first = load_model(run.snapshot(0))
        init = (answer_codes(first, train.tokens)[0],
                {n: answer_codes(first, b.tokens)[0] for n, b in sets.items()})  # fmt: skip
    result = {
        "run": str(run.path), "step": step, "variant": variant_of(cfg),
        "attention": cfg.model.attention, "n_heads": cfg.model.n_heads, "seed": cfg.seed,
        "n_train": len(train), "n_test": {n: len(b) for n, b in sets.items()},
        "features": int(codes_train[0].numel()),
        "model_accuracy": {n: model_accuracy(lg, sets[n]) for n, (_, lg) in out_sets.items()},
        "probe": probe_forms(train, codes_train, sets, codes_sets, cfg.task.p, cfg.task.K,
                             seed, init),
        "structure": code_structure(train, codes_train, sets, codes_sets, seed=seed),
        "phases": _jumps(_phases(run)), "_phases": _phases(run),
    }  # fmt: skip
    if timeline and run.snapshot_steps():
        small = {n: _subsample(b, max(n_test // 4, 50), seed, "t" + n) for n, b in sets.items()}
        result["timeline"] = codes_over_training(
            run, _subsample(train, max(n_train // 3, 200), seed, "t"), small, every, progress)
        result["_metrics"] = run.read_metrics()
    result["goal"] = goal_met(result)
    return result


def variant_of(cfg) -> str:
    """A run's variant for the codes: its attention and head count."""
    return f"{cfg.model.attention}, {cfg.model.n_heads} head{'s' * (cfg.model.n_heads > 1)}"


def _phases(run: RunDir) -> dict:
    """summary.json's phases ({} before the run has finished)."""
    try:
        return run.read_summary().get("phases") or {}
    except UserError:
        return {}


def _jumps(phases: dict) -> dict:
    return {k: (phases.get(k) or {}).get("jump_end_step") for k in ("first_spike", "second_spike")}


def goal_met(result: dict) -> dict:
    """The held-out sets on which the model reaches GOAL, and whether the form probe reaches
    it on each of them (`met`: on every one; None when the model reaches it on none)."""
    model, probe = result["model_accuracy"], result["probe"]["form"]["probe"]
    sets = [n for n in HELD_OUT_SETS if n in model and model[n] >= GOAL]
    hits = {n: probe[n] is not None and probe[n] >= GOAL for n in sets}
    return {"sets": sets, "hits": hits, "met": all(hits.values()) if sets else None}


def association(results: list[dict]) -> dict:
    """Per held-out set, over every run: Spearman's rank correlation of the form probe's
    accuracy with the model's own ({"rho", "pvalue", "n"}; None with fewer than 3 runs or a
    constant side): do runs whose codes of a novel composition look like its form's also
    answer it?"""
    out = {}
    for s in HELD_OUT_SETS:
        pairs = [(_get(r, "probe", s), _get(r, "model", s)) for r in results]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if len(pairs) < 3 or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
            out[s] = None
            continue
        res = spearmanr([a for a, _ in pairs], [b for _, b in pairs])
        out[s] = {"rho": float(res.statistic), "pvalue": float(res.pvalue), "n": len(pairs)}
    return out


def codes_of_runs(results: list[dict]) -> dict:
    """Per variant: its runs, per set the median [min, max] of the probe's and the model's
    accuracy and of each control's, and the runs meeting the goal (k of n)."""
    variants: dict[str, list[dict]] = {}
    for r in results:
        variants.setdefault(r["variant"], []).append(r)
    out = {}
    for name, runs in variants.items():
        rows = {}
        for s in SETS:
            rows[s] = {key: _spread([_get(r, key, s) for r in runs])
                       for key in ("model", "probe", "initial_codes", "shuffled_labels",
                                   "majority", "nearest_centroid")}  # fmt: skip
        counted = [r["goal"]["met"] for r in runs if r["goal"]["met"] is not None]
        out[name] = {"runs": [r["run"] for r in runs], "sets": rows,
                     "goal": {"met": sum(counted), "of": len(counted), "runs": len(runs)},
                     "silhouette": _spread([r["structure"]["silhouette"] for r in runs]),
                     "appears": [(r.get("timeline") or {}).get("appears_step") for r in runs],
                     "first_jump": [r["phases"].get("first_spike") for r in runs]}  # fmt: skip
    return out


def _get(result: dict, key: str, name: str):
    if key == "model":
        return result["model_accuracy"].get(name)
    if key == "nearest_centroid":
        return result["structure"]["nearest_centroid"].get(name)
    return result["probe"]["form"].get(key, {}).get(name)


def _spread(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}  # fmt: skip


def default_out(run_dirs: list[str], out: str | None) -> Path:
    """Where the files go: --out, or RUN/codes for a single run."""
    if out is not None:
        return Path(out)
    if len(run_dirs) == 1:
        return Path(run_dirs[0]) / "codes"
    raise UserError("several runs need --out DIR (where their summary goes)")
