"""The dynamics ladder end to end: the baseline's one-step checks, then every variant x
seed trained, one after the other, and the per-variant aggregates.

    result = run_ladder_dynamics(load_config(DynamicsConfig, "configs/ladder_dynamics.toml"))
    write_outputs(result, "runs/ladder_dynamics")
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from empirical.bridge.ladder_dynamics.config import DynamicsConfig
from empirical.bridge.ladder_dynamics.onestep import one_step_report
from empirical.bridge.ladder_dynamics.trainer import Context, RunResult, train_run
from empirical.bridge.ladder_dynamics.variants import DESCRIPTIONS, ladder_variants
from empirical.config.io import to_dict


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def aggregate(name: str, releases: tuple[str, ...], runs: list[RunResult]) -> dict:
    """One row of the table: a variant's seeds together."""
    finals = [r.final.get("2var") for r in runs]
    return {
        "variant": name, "releases": list(releases),
        "changed": [DESCRIPTIONS[r] for r in releases], "seeds": [r.seed for r in runs],
        "composed": sum(r.emergence_step is not None for r in runs),
        "diverged": sum(r.diverged for r in runs),
        "emergence_steps": [r.emergence_step for r in runs],
        "cos_first": _mean([r.cos_first for r in runs]),
        "cos_first10": _mean([r.cos_first10 for r in runs]),
        "cos_spike": _mean([r.spike["cos"] for r in runs]),
        "spike_steps": [r.spike["step"] for r in runs],
        "final_2var": _mean(finals),
        "final_2var_min": min((f for f in finals if f is not None), default=None),
        "final_1var": _mean([r.final.get("1var") for r in runs]),
        "final_0var": _mean([r.final.get("0var") for r in runs]),
        # under `task`: 2-var on the sequences its rules allow in training (the paper's
        # in-distribution sets), beside the whole population's
        "final_2var_allowed": _mean([r.final.get("2var_allowed") for r in runs]),
        "memory_diag": _mean([r.memory["diag"] for r in runs]),
        "memory_offdiag": _mean([r.memory["offdiag"] for r in runs]),
    }  # fmt: skip


def run_ladder_dynamics(cfg: DynamicsConfig, progress: Callable[[str], None] | None = None) -> dict:
    """Every variant x seed (one process, one after the other) and the one-step checks;
    returns the JSON-ready result (config, one_step, variants, runs, seconds)."""
    say = progress or (lambda _msg: None)
    torch.set_num_threads(cfg.threads)
    start = time.perf_counter()
    say("one-step checks (first update, composing step size)")
    one = one_step_report(cfg)
    ctx = Context.build(cfg)
    rows, runs = [], []
    todo = ladder_variants(cfg.releases)
    for i, (name, releases) in enumerate(todo, 1):
        mine = []
        for seed in cfg.seeds:
            r = train_run(ctx, releases, seed)
            mine.append(r)
            say(f"[{i}/{len(todo)}] {name} seed {seed}: 2-var {r.acc_2var[-1]:.3f}, "
                f"composed at {r.emergence_step}, {r.seconds:.1f} s")  # fmt: skip
        rows.append(aggregate(name, releases, mine))
        runs += [r.to_json() for r in mine]
    return {"config": to_dict(cfg), "one_step": one, "variants": rows, "runs": runs,
            "seconds": time.perf_counter() - start}  # fmt: skip
