"""Many named configs x seeds trained at once: the exploration tool behind issue #5's search.

A grid config is a run config plus a `[grid]` table of named variants, each a list of
run-config overrides applied to the base:

    [grid]
    seeds = [0, 1]
    max_batch = 0
    [grid.variants]
    spec = []
    disjoint_wd01 = ['task.r2=["b", "c"]', "train.weight_decay=0.1"]

Every (variant, seed) is a member, trained as in a sweep (`train_batch`: members that share
the architecture and the [train] settings other than lr and weight decay share one batched
model; each member directory is a standard run directory; a second call skips finished
members and resumes the rest). The results are every evaluation set's final accuracy per
member and per variant (mean, min and max over seeds), the first step at which every set
reached the target, in `grid.json`, `grid.md` and a heatmap `grid.png`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from empirical.config_io import (
    ConfigError,
    apply_overrides,
    atomic_write_bytes,
    from_dict,
    to_dict,
)
from empirical.run_config import RunConfig
from empirical.sweep.runner import member_status, plan_batches
from empirical.sweep.spec import Member, load_config_with_table
from empirical.sweep.trainer import member_stopped, train_batch
from empirical.train.metrics import read_metrics
from empirical.train.summary import first_step_all_above

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass
class GridSpec:
    """The `[grid]` table: variant name -> overrides, seeds, batch limit, target."""

    variants: dict[str, list[str]] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0])
    max_batch: int = 0
    target: float = 0.99

    def __post_init__(self) -> None:
        if not isinstance(self.variants, dict) or not self.variants:
            raise ConfigError("grid.variants: give at least one variant (name = [overrides])")
        for name, overrides in self.variants.items():
            if not _NAME.match(name):
                raise ConfigError(
                    f"grid.variants: name {name!r}: use letters, digits, '_', '.', '+', '-'"
                )
            if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
                raise ConfigError(
                    f"grid.variants.{name} = {overrides!r} must be a list of override strings "
                    "such as ['train.weight_decay=0.1']"
                )
        seeds = list(self.seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise ConfigError(f"grid.seeds = {self.seeds!r} must be a non-empty list of ints >= 0")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"grid.seeds = {seeds} repeats a seed")
        self.seeds = seeds
        if isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int):
            raise ConfigError(f"grid.max_batch = {self.max_batch!r} must be an integer >= 0")
        if self.max_batch < 0:
            raise ConfigError(f"grid.max_batch = {self.max_batch!r} must be an integer >= 0")
        if not isinstance(self.target, (int, float)) or not 0 < self.target <= 1:
            raise ConfigError(f"grid.target = {self.target!r} must be a number in (0, 1]")


def load_grid_config(path, overrides: list[str] | None = None) -> tuple[RunConfig, GridSpec]:
    """(base run config, grid spec) from a grid config file and run-config overrides."""
    base, table = load_config_with_table(path, "grid", overrides)
    if table is None:
        raise ConfigError(f"{path}: no [grid] table (see docs/sweep.md, 'Grids')")
    return base, from_dict(GridSpec, table, prefix="grid.")


def expand_grid(base: RunConfig, spec: GridSpec) -> list[Member]:
    """One Member per (variant, seed), validated before anything trains."""
    members = []
    for name, overrides in spec.variants.items():
        for seed in spec.seeds:
            data = to_dict(base)
            data["seed"], data["name"] = int(seed), f"{base.name}.{name}"
            try:
                cfg = from_dict(RunConfig, apply_overrides(data, RunConfig, list(overrides)))
            except ConfigError as exc:
                raise ConfigError(f"grid.variants.{name}: {exc}") from None
            members.append(Member(name, int(seed), cfg, f"{name}_seed{seed}"))
    return members


def run_grid(
    base: RunConfig,
    spec: GridSpec,
    out_dir: str | Path,
    *,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
) -> dict:
    """Train every unfinished member, then write grid.json, grid.md and grid.png."""
    say = log or (lambda _text: None)
    out_dir = Path(out_dir)
    members = expand_grid(base, spec)
    statuses = {m.dirname: member_status(m, out_dir / "members" / m.dirname) for m in members}
    todo = [m for m in members if statuses[m.dirname][0] in ("resume", "fresh")]
    starts = {m.dirname: statuses[m.dirname][1] for m in todo}
    batches = plan_batches(todo, starts, spec.max_batch)
    out_dir.mkdir(parents=True, exist_ok=True)
    say(
        f"grid {base.name}: {len(spec.variants)} variants x {len(spec.seeds)} seeds = "
        f"{len(members)} members in {out_dir}; {len(members) - len(todo)} done or stopped, "
        f"{len(batches)} batch(es) to train"
    )
    timings = []
    for i, batch in enumerate(batches):
        say(f"batch {i + 1}/{len(batches)}: {len(batch)} members: {[m.dirname for m in batch]}")
        t0 = time.perf_counter()

        def on_eval(step, records, t0=t0):
            if progress:
                return
            worst = [min(r["acc"].values()) for r in records if r and r.get("acc")]
            if worst:
                say(
                    f"  step {step} ({time.perf_counter() - t0:.0f} s): lowest set per member: "
                    f"median {100 * sorted(worst)[len(worst) // 2]:.1f}%, "
                    f"best {100 * max(worst):.1f}%"
                )

        train_batch(
            [(m.cfg, out_dir / "members" / m.dirname) for m in batch],
            progress=progress,
            on_eval=on_eval,
            labels=[m.dirname for m in batch],
            metric=lambda _m, acc: min(acc.values()),
        )
        timings.append({"members": len(batch), "seconds": time.perf_counter() - t0})
        say(f"  batch {i + 1} took {timings[-1]['seconds']:.0f} s")
    results = collect_grid(members, spec, out_dir)
    results["batch_timings"] = timings
    write_grid(results, out_dir)
    say(f"wrote {out_dir / 'grid.json'}, {out_dir / 'grid.md'}, {out_dir / 'grid.png'}")
    return results


def collect_grid(members: list[Member], spec: GridSpec, out_dir: Path) -> dict:
    rows = []
    for m in members:
        run_dir = out_dir / "members" / m.dirname
        stop = member_stopped(run_dir)
        path = run_dir / "metrics.jsonl"
        records = read_metrics(path) if path.exists() else []
        last = records[-1] if records else None
        rows.append(
            {
                "member": m.dirname,
                "variant": m.value,
                "seed": m.seed,
                "step": last["step"] if last else 0,
                "finished": bool(last) and last["step"] == m.cfg.train.steps and stop is None,
                "stopped": stop["reason"] if stop else None,
                "final_acc": last["acc"] if last else {},
                "first_step_all_above_target": first_step_all_above(records, spec.target),
            }
        )
    sets = sorted({k for r in rows for k in r["final_acc"]}, key=_set_order)
    variants = []
    for name, overrides in spec.variants.items():
        mine = [r for r in rows if r["variant"] == name and r["final_acc"]]
        acc = {}
        for s in sets:
            vals = [r["final_acc"][s] for r in mine if s in r["final_acc"]]
            if vals:
                acc[s] = {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals)}
        variants.append(
            {
                "variant": name,
                "overrides": overrides,
                "members": [r["member"] for r in mine],
                "steps": sorted({r["step"] for r in mine}),
                "acc": acc,
                "min_set_mean": min((a["mean"] for a in acc.values()), default=math.nan),
            }
        )
    return {
        "name": members[0].cfg.name.split(".")[0] if members else "grid",
        "target": spec.target,
        "seeds": spec.seeds,
        "sets": sets,
        "variants": variants,
        "members": rows,
    }


def _set_order(name: str) -> tuple:
    from empirical.task import EVAL_SET_NAMES

    return (EVAL_SET_NAMES.index(name), name) if name in EVAL_SET_NAMES else (999, name)


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def grid_markdown(results: dict) -> str:
    sets = results["sets"]
    lines = [
        f"# Grid: final accuracy (%) per evaluation set, mean over seeds {results['seeds']}",
        "",
        "min over seeds in parentheses; 'all >= target' is each member's first evaluated step "
        f"with every set >= {100 * results['target']:g}%.",
        "",
        "| variant | steps | " + " | ".join(sets) + " | all >= target |",
        "| --- | --- | " + " | ".join("---" for _ in sets) + " | --- |",
    ]
    by_variant = {}
    for r in results["members"]:
        by_variant.setdefault(r["variant"], []).append(r)
    for v in results["variants"]:
        cells = []
        for s in sets:
            a = v["acc"].get(s)
            cells.append("-" if a is None else f"{_pct(a['mean'])} ({_pct(a['min'])})")
        firsts = [str(r["first_step_all_above_target"]) for r in by_variant.get(v["variant"], [])]
        steps = ",".join(map(str, v["steps"])) or "0"
        lines.append(
            f"| {v['variant']} | {steps} | " + " | ".join(cells) + f" | {', '.join(firsts)} |"
        )
    lines += ["", "## Variants", ""]
    for v in results["variants"]:
        lines.append(f"- `{v['variant']}`: {' '.join(v['overrides']) or '(the base config)'}")
    stopped = [r for r in results["members"] if r["stopped"]]
    if stopped:
        lines += ["", "## Stopped members", ""]
        lines += [f"- {r['member']}: {r['stopped']}" for r in stopped]
    return "\n".join(lines) + "\n"


def plot_grid(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sets, variants = results["sets"], results["variants"]
    data = np.array(
        [[v["acc"].get(s, {}).get("mean", np.nan) * 100 for s in sets] for v in variants]
    )
    fig, ax = plt.subplots(figsize=(2.5 + 0.9 * len(sets), 3.0 + 0.45 * len(variants)))
    im = ax.imshow(data, vmin=0, vmax=100, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(sets)), sets, rotation=45, ha="right")
    ax.set_yticks(range(len(variants)), [v["variant"] for v in variants])
    for i in range(len(variants)):
        for j in range(len(sets)):
            if not np.isnan(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="white" if data[i, j] < 60 else "black",
                )
    ax.set_xlabel("evaluation set")
    ax.set_ylabel("variant")
    steps = sorted({r["step"] for r in results["members"]})
    ax.set_title(
        f"{results.get('name', 'grid')}: final accuracy (%) per evaluation set, mean over "
        f"seeds {results['seeds']} (step {', '.join(map(str, steps))})"
    )
    fig.colorbar(im, ax=ax, label="accuracy (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_grid(results: dict, out_dir: Path) -> None:
    atomic_write_bytes(out_dir / "grid.json", json.dumps(results, indent=2).encode())
    atomic_write_bytes(out_dir / "grid.md", grid_markdown(results).encode())
    plot_grid(results, out_dir / "grid.png")
