"""Reading a population: its member run directories (`members/<variant>_seed<S>`), each
checked to be a run of the population's config in everything but the seed, the name and how
it was executed (`population_config`, `EXECUTION_FIELDS`) and read once (`read_member`). A
member counts once finished (summary.json at `train.steps`); what is an error (a
PopulationError): docs/populations.md, "The command".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disentangled.errors import UserError
from empirical.config.io import dotted, fingerprint_of, non_default_fields, to_dict
from empirical.experiments.population.quantities import spike_numbers
from empirical.runs.rundir import RunDir


class PopulationError(UserError):
    """A population that cannot be summarised as asked: the message names the member or the
    variant and what to do."""


# [train] fields that say how a member was executed, not which run it is (a population may be
# trained on several machines): run_config.RESUMABLE_CHANGES without `steps` (a population at
# 2 000 steps is not the one at 40 000), and sample_chunk
EXECUTION_FIELDS = ("device", "threads", "eval_batch_size", "compile", "cuda_graph", "tensorboard",
                    "sample_chunk")


def population_config(cfg, full: bool = False) -> dict[str, Any]:
    """A RunConfig as the plain dict of its non-default fields (`full`: of every field)
    without the seed, the name and the execution fields: what every member of one population
    shares."""
    data = to_dict(cfg) if full else non_default_fields(cfg)
    data.pop("seed", None)
    data.pop("name", None)
    train = data.get("train", {})
    for name in (*EXECUTION_FIELDS, "init_perturbation_seed"):  # a seed, as `seed` is
        train.pop(name, None)
    if not train:
        data.pop("train", None)
    return data


def population_fingerprint(cfg) -> str:
    """sha256 of `population_config(cfg)`: equal for every run of one population, whatever its
    seed (how a run finds its published population: empirical.experiments.population.placement)."""
    return fingerprint_of(population_config(cfg))


def _differences(found: dict, expected: dict, missing: str) -> list[str]:
    a, b = dotted(found), dotted(expected)
    return [f"{key} = {a.get(key, missing)!r} (the population's: {b.get(key, missing)!r})"
            for key in sorted(set(a) | set(b)) if a.get(key, missing) != b.get(key, missing)]


def dict_differences(found: dict, expected: dict) -> list[str]:
    """config_differences of two population_config dicts (a field absent from one is at its
    default there)."""
    return _differences(found, expected, "(default)")


def config_differences(found, expected) -> list[str]:
    """'train.lr = 0.003 (the population's: 0.001)' for every field in which two RunConfigs
    differ, the seed, the name and the execution fields aside."""
    return _differences(population_config(found, full=True),
                        population_config(expected, full=True), "(not set)")


FINISHED, UNFINISHED, STOPPED, MISSING = "finished", "unfinished", "stopped", "missing"


def member_status(run: RunDir, steps: int) -> tuple[str, int]:
    """(status, last evaluated step) of a member directory: "missing" (no run there),
    "stopped" (a non-finite loss stopped it: stopped.json), "finished" (summary.json at
    `steps` or later) or "unfinished"."""
    if not run.is_run():
        return MISSING, 0
    stop = run.read_stopped()
    if stop is not None:
        return STOPPED, int(stop.get("step", 0) or 0)
    summary = _read_json(run.summary) if run.summary.exists() else None
    if summary is not None and int(summary.get("final_step", 0) or 0) >= steps:
        return FINISHED, int(summary["final_step"])
    last = 0
    if run.metrics.exists():
        lines = [ln for ln in run.metrics.read_text().splitlines() if ln.strip()]
        if lines:
            try:
                last = int(json.loads(lines[-1]).get("step", 0))
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                last = 0
    return UNFINISHED, last


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PopulationError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except OSError as exc:
        raise PopulationError(f"{path}: unreadable ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise PopulationError(f"{path}: expected a JSON object")
    return data


def check_config(run: RunDir, expected, variant: str):
    """The member's RunConfig, or a PopulationError naming the fields in which it differs from
    the population's config `expected` (a RunConfig of the population)."""
    cfg = run.read_config()
    if population_config(cfg) != population_config(expected):
        diff = config_differences(cfg, expected) or ["fields at their defaults"]
        shown = "; ".join(diff[:3]) + (f"; and {len(diff) - 3} more" if len(diff) > 3 else "")
        raise PopulationError(f"{run.path}: a run of another config than population {variant!r} "
                              f"({shown}): a population is one config and its seeds; give it "
                              "its own --out or variant")
    return cfg


@dataclass
class Member:
    """One finished member of a population, read once."""

    name: str  # its directory name (`ours_seed3`)
    seed: int
    path: Path
    config: Any  # its RunConfig
    summary: dict
    records: list[dict]
    analysis: dict | None = None  # analysis.json's content (None: not analysed)
    spike: dict | None = None  # the first spike's theory-vs-run numbers (compare-qk)
    notes: list[str] = field(default_factory=list)  # why something is missing

    @property
    def final_step(self) -> int:
        return int(self.summary.get("final_step", self.records[-1]["step"] if self.records else 0))


def read_member(run: RunDir, expected, variant: str) -> Member:
    """A finished member directory as a Member (analysis and spike numbers filled in by
    `prepare`): its config checked against the population's, summary.json and metrics read."""
    cfg = check_config(run, expected, variant)
    if not run.summary.exists():
        raise PopulationError(f"{run.path}: no {RunDir.SUMMARY}: the member has not finished")
    summary = _read_json(run.summary)
    if not run.metrics.exists():
        raise PopulationError(f"{run.metrics}: missing: a member without metrics cannot be counted "
                              "(jumps, robust final accuracy and collapses are read from it); "
                              "retrain the member or remove its directory")
    records = run.read_metrics()
    if not records:
        raise PopulationError(f"{run.metrics}: empty: a member without metrics cannot be counted")
    return Member(run.name, int(cfg.seed), run.path, cfg, summary, records)


def read_analysis(run: RunDir) -> dict | None:
    """analysis.json of the member's final model (None: absent or older than the model)."""
    path = run.analysis_dir() / RunDir.ANALYSIS_JSON
    if not path.exists():
        return None
    try:
        if path.stat().st_mtime < run.final_model().stat().st_mtime:
            return None
    except (OSError, UserError):
        return None
    try:
        return _read_json(path)
    except PopulationError:
        return None  # unreadable: analysed again


def _newer(path: Path, run: RunDir) -> bool:
    """`path` exists and is no older than the member's final model."""
    try:
        return path.exists() and path.stat().st_mtime >= run.final_model().stat().st_mtime
    except (OSError, UserError):
        return False


def existing_spike(run: RunDir) -> dict | None:
    """The first spike's numbers from an up-to-date compare-qk output of the member: the full
    `compare_qk/` of `python -m empirical compare-qk`, else `compare_qk_spike1/`."""
    for folder in (run.compare_qk_dir, run.compare_qk_spike1_dir):
        path = folder / RunDir.COMPARE_QK_JSON
        if _newer(path, run):
            try:
                found = spike_numbers(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError):
                found = None
            if found is not None:
                return found
    return None
