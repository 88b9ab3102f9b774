"""The race end to end: for every configuration, the criterion's step-0 quantities and the
ladder's training on each seed (the outcome), kept in OUT/race_state.json after every piece of
work so that a rerun resumes where the last stopped; then tau fitted on the fit half and every
configuration predicted.

    result = run_race(select(None), out_dir="runs/race")
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from empirical.bridge.ladder_dynamics.trainer import Context, train_run
from empirical.bridge.race.configs import (
    RaceConfig,
    dynamics_config,
    known_when_written,
    original_configs,
)
from empirical.bridge.race.criterion import StepZero, predict
from empirical.bridge.race.criterion import step_zero as compute_step_zero
from empirical.bridge.race.fit import fit_tau, tau_free
from empirical.bridge.race.scores import critical_rates, scores
from empirical.config.io import ConfigError, to_dict
from empirical.report.files import atomic_write_bytes
from empirical.report.provenance import provenance

STATE = "race_state.json"
CRITERION = (
    "memory wins iff T_mem <= tau T_in; if it wins: composed iff T_mem <= S; else composed "
    "iff 2-var is trained and tau T_in <= S (T_mem: steps along the optimiser's step-0 update "
    "of W_QK until 2-var composes; T_in: training loss / first-order loss decrease per step "
    "through layer 1 and the embeddings; docs/race.md)"
)
TAU_FREE = (
    "composes iff (layer 1 and the embeddings are frozen and T_mem <= S) or (they train and "
    "2-var is in the training data): no tau, no race"
)


def _load_state(out: Path) -> dict:
    path = out / STATE
    if not path.exists():
        return {"configs": {}}
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a race state file ({exc}); use another --out") from None


def _save_state(out: Path, state: dict) -> None:
    atomic_write_bytes(out / STATE, json.dumps(state, indent=1).encode())


def _run_summary(r) -> dict:
    """A run's record: "composed" is sustained (>= the threshold on every evaluation of the
    last fifth); "touched", the threshold reached at some evaluation (docs/race.md)."""
    return {"seed": r.seed, "composed": r.sustained, "touched": r.emergence_step is not None,
            "emergence_step": r.emergence_step, "final": r.final, "diverged": r.diverged,
            "eval_steps": r.eval_steps, "acc_2var": r.acc_2var, "spike": r.spike,
            "memory": r.memory, "seconds": r.seconds}  # fmt: skip


def _entry(state: dict, rc: RaceConfig, cfg_dict: dict) -> dict:
    """The state's record of `rc`, checked to be of the same settings but the seeds (else a
    ConfigError); more seeds add runs to it (the record lists the seeds asked for last)."""
    entry = state["configs"].setdefault(rc.name, {"config": cfg_dict, "runs": {}})
    settings = {k: v for k, v in cfg_dict.items() if k != "seeds"}
    if {k: v for k, v in entry["config"].items() if k != "seeds"} != settings:
        raise ConfigError(f"{STATE}: {rc.name!r} was run with other settings there; use "
                          "another --out (or remove that file)")  # fmt: skip
    entry["config"] = cfg_dict
    return entry


def _todo(configs, overrides, seeds, state: dict) -> list[tuple[RaceConfig, object]]:
    """(configuration, its ladder config) for each: the seeds are `seeds` if given, else those
    the state recorded for it (a configuration started with `--seeds 0` resumes with seed 0),
    else the ladder's."""
    out = []
    for rc in configs:
        recorded = state["configs"].get(rc.name, {}).get("config", {}).get("seeds")
        chosen = seeds or recorded
        extra = [f"seeds={json.dumps(list(chosen))}"] if chosen else []
        out.append((rc, dynamics_config(rc, [*(overrides or []), *extra])))
    return out


def _measure(rc, cfg, entry, save, bar, train: bool = True) -> None:
    """The configuration's step-0 quantities and (if `train`) every seed's run that the
    state lacks."""
    missing = [s for s in cfg.seeds if str(s) not in entry["runs"]] if train else []
    if "step_zero" in entry and not missing:
        return
    torch.set_num_threads(cfg.threads)
    ctx = Context.build(cfg)
    if "step_zero" not in entry:
        entry["step_zero"] = compute_step_zero(ctx, rc.releases).to_json()
        save()
    for seed in missing:
        bar.set_postfix_str(f"{rc.name} seed {seed}")
        entry["runs"][str(seed)] = _run_summary(train_run(ctx, rc.releases, seed))
        save()
        bar.update(1)


def run_race(
    configs: list[RaceConfig],
    out_dir: str | Path,
    overrides: list[str] | None = None,
    seeds: list[int] | None = None,
    progress: bool = True,
    say: Callable[[str], None] = lambda _m: None,
    predict_only: bool = False,
    command: str = "python -m empirical race",
) -> dict:
    """Measure what the state lacks (resuming), then fit tau and predict; returns race.json's
    content. `predict_only`: train nothing (step-0 quantities only); tau is fitted on the fit
    half's configurations as the state has them (all must be finished: else a ConfigError)."""
    out = Path(out_dir)
    origin = provenance(command)  # the code as it was when the command started
    state = _load_state(out)
    if predict_only:
        names = {c.name for c in configs}
        configs = [*configs, *(c for c in original_configs()
                               if c.split == "fit" and c.name not in names)]  # fmt: skip
    todo = _todo(configs, overrides, seeds, state)
    start = time.perf_counter()
    entries = [_entry(state, rc, to_dict(cfg)) for rc, cfg in todo]
    total = 0 if predict_only else sum(len(cfg.seeds) for _, cfg in todo)
    done = 0 if predict_only else sum(str(s) in e["runs"] for (_, cfg), e in
                                      zip(todo, entries, strict=True) for s in cfg.seeds)
    say(f"{len(todo)} configurations, {total} runs ({done} already in {out / STATE})")
    with tqdm(total=total, initial=done, disable=not progress, unit="run") as bar:
        for (rc, cfg), entry in zip(todo, entries, strict=True):
            _measure(rc, cfg, entry, lambda: _save_state(out, state), bar, not predict_only)
    result = assemble(todo, entries, time.perf_counter() - start)
    return result | {"provenance": origin}


def _row(rc, cfg, entry) -> dict:
    """One configuration's row: its step-0 quantities and, where every seed has run, its
    outcome (the majority of the seeds' sustained composition); else "composed" is None."""
    runs = [entry["runs"].get(str(s)) for s in cfg.seeds]
    row = {"name": rc.name, "split": rc.split, "releases": list(rc.releases),
           "overrides": list(rc.overrides), "steps": cfg.steps,
           "known_when_written": rc.name in known_when_written(),
           "step_zero": StepZero.from_json(entry["step_zero"]), "composed": None}  # fmt: skip
    if all(r is not None for r in runs):
        n = sum(r["composed"] for r in runs)
        row.update({"composed": 2 * n > len(runs), "seeds_composed": n, "seeds": len(runs),
                    "seeds_touched": sum(r["touched"] for r in runs),
                    "emergence_steps": [r["emergence_step"] for r in runs],
                    "final_2var": [r["final"].get("2var") for r in runs]})  # fmt: skip
    return row


def assemble(todo, entries, seconds: float) -> dict:
    """race.json's content from the measured entries: outcomes, tau, predictions and the
    scores (scores.py)."""
    rows = [_row(rc, cfg, entry) for (rc, cfg), entry in zip(todo, entries, strict=True)]
    done = [r for r in rows if r["composed"] is not None]
    if not any(r["split"] == "fit" for r in done):
        raise ConfigError("race: no configuration of the fit half has finished in "
                          f"{STATE}: run them before predicting")  # fmt: skip
    return _scored(rows, done, seconds)


def rescore(published: dict) -> dict:
    """A race.json written earlier scored as `assemble` scores now (its own outcomes; tau
    fitted again on its fit half; each configuration marked known when the criterion was
    written or not): what it says beside the rules it must beat."""
    known = known_when_written()
    rows = []
    for c in published["configs"]:
        row = {**c, "step_zero": StepZero.from_json(c["step_zero"]),
               "known_when_written": c["name"] in known}  # fmt: skip
        row.setdefault("seeds_touched", row.get("seeds_composed"))
        rows.append(row)
    done = [r for r in rows if r.get("composed") is not None]
    return _scored(rows, done, 0.0)


def _scored(rows: list[dict], done: list[dict], seconds: float) -> dict:
    """tau fitted on the finished rows' fit half, every row predicted (the criterion and the
    tau-free rule), the scores and critical rates: race.json's content."""
    steps = max((r["steps"] for r in rows), default=0)
    fit = fit_tau(done, steps)
    for r in rows:
        r.update(predict(r["step_zero"], fit["tau"], r["steps"]))
        r["tau_free"] = tau_free(r["step_zero"], r["steps"])
    return {"criterion": CRITERION, "tau_free_rule": TAU_FREE, "tau": fit["tau"],
            "tau_interval": fit["interval"], **scores(done, fit, steps),
            "critical": critical_rates(rows, fit),
            "configs": [dict(r, step_zero=r["step_zero"].to_json()) for r in rows],
            "seconds": seconds}  # fmt: skip
