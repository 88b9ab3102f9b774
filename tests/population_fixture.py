"""A synthetic population whose every statistic is known: four member run directories of one
grid config (the smoke task, 4 000 steps, an evaluation every 100) written from hand-made
metrics and phases, no model trained. Used by tests/test_population_*.py.

    member  1var/var over training                       first jump  second jump
    seed0   1.0 from step 1 000                            1 000       2 000
    seed1   1.0 from 1 000, 0.90 at the last step 4 000    1 000       2 000
    seed2   1.0 from 1 000, 0.50 at 3 000 (back at 3 100)  1 000       none
    seed3   0.60 from 1 000 on                             none        none

Every other set is 1.0 from step 1 000 (0.0 before). So at the last evaluation "> 99% on every
1var set" holds in seeds 0 and 2; on the robust final accuracy (the mean of the 20
evaluations in (2 000, 4 000]) in seeds 0 (1.0) and 1 (0.995), not 2 (0.975) or 3; 1var/var
collapses late in seeds 1 (at 4 000, not back) and 2 (at 3 000, back at 3 100, lowest 0.50).
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
SETS = ("0var/ind", "1var/ind", "1var/var", "2var/ind")
STEPS = 4000
EVERY = 100
SIZE = 1000  # sequences per evaluation set
FIRST = {0: 1000, 1: 1000, 2: 1000, 3: None}
SECOND = {0: 2000, 1: 2000, 2: None, 3: None}


def grid_config(tmp: Path, extra: str = "") -> Path:
    """A grid config of the smoke task with one variant `ours` and seeds 0-3."""
    path = tmp / "population.toml"
    path.write_text(
        f'base = "{SMOKE.as_posix()}"\nname = "synthetic"\n{extra}\n[train]\nsteps = {STEPS}\n'
        f"eval_every = {EVERY}\n\n[grid]\nseeds = [0, 1, 2, 3]\n[grid.variants]\nours = []\n"
    )
    return path


def var_curve(seed: int, step: int) -> float:
    if step < 1000:
        return 0.0
    if seed == 1 and step == STEPS:
        return 0.9
    if seed == 2 and step == 3000:
        return 0.5
    if seed == 3:
        return 0.6
    return 1.0


def rise(jump_end: int | None) -> dict | None:
    if jump_end is None:
        return None
    return {"start_step": jump_end - 300, "end_step": jump_end + 300, "gain": 0.9,
            "reached_90_step": jump_end, "jump_start_step": jump_end - EVERY,
            "jump_end_step": jump_end, "jump_gain": 0.8, "plateau_step": jump_end,
            "rule": "through_90"}  # fmt: skip


def write_member(run: Path, cfg, seed: int, curve=var_curve, first=FIRST, second=SECOND) -> None:
    """One finished member: config.toml, metrics.jsonl and summary.json."""
    from empirical.config.io import save_config

    run.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run / "config.toml")
    records = []
    for step in range(0, STEPS + 1, EVERY):
        acc = {s: (1.0 if step >= 1000 else 0.0) for s in SETS}
        acc["1var/var"] = curve(seed, step)
        records.append({"step": step, "acc": acc, "loss": {s: 0.1 for s in SETS}})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {
        "name": cfg.name,
        "seed": seed,
        "final_step": STEPS,
        "final_acc": records[-1]["acc"],
        "eval_set_sizes": {s: SIZE for s in SETS},
        "phases": {"zero_var_learned_step": 1000, "first_spike": rise(first.get(seed)),
                   "second_spike": rise(second.get(seed))},  # fmt: skip
        "device_name": "CPU (synthetic)",
    }
    (run / "summary.json").write_text(json.dumps(summary))


def write_population(tmp: Path) -> tuple[Path, Path]:
    """(grid config, population directory) of the synthetic population."""
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    config = grid_config(tmp)
    out = tmp / "pop"
    base, spec = load_grid_config(config)
    for m in expand_grid(base, spec):
        write_member(out / "members" / m.dirname, m.cfg, m.seed)
    return config, out
