"""The interventions at a spike (issue #36 item 4; docs/attribution.md, "`intervene`"): what
each condition changes in the training (`CONDITIONS`: train.freeze / train.project_out,
empirical/train/constraints.py), and the G1 direction `project_g1` projects out.

    member_configs(cfg, ["none", ...], 20, direction_file)   # [(condition, replicate, cfg)]
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from empirical.bridge.compare_qk.snapshot import g1_direction

CONDITIONS: dict[str, dict] = {
    "none": {},
    "freeze_layer2_qk": {"freeze": ("layer2_qk",)},
    "freeze_layer1_embed": {"freeze": ("W_E", "W_pos", "layer1_qk", "layer1_ov")},
    "project_g1": {"project_out": True},
}


def member_configs(cfg, conditions: list[str], replicates: int, direction: str | None):
    """[(condition, replicate, RunConfig)]: one member per condition and replicate, all of the
    run's config but for train.freeze / train.project_out (`direction`: the G1 file, needed
    where a condition projects)."""
    out = []
    for name in conditions:
        change = CONDITIONS[name]
        train = replace(
            cfg.train,
            freeze=tuple(change.get("freeze", ())),
            project_out=str(direction) if change.get("project_out") else "",
        )
        member = replace(cfg, train=train)
        out += [(name, r, member) for r in range(replicates)]
    return out


def write_g1_direction(cfg, model, path: Path, **sizes) -> dict:
    """g1_direction written as a train.project_out file (constraints.save_direction)."""
    from empirical.train.constraints import save_direction

    G, rows, cols, info = g1_direction(cfg, model, **sizes)
    save_direction(
        path, G, rows, cols, f"G1 (dual frame), a = {info['a']:.4g}, b = {info['b']:.4g}"
    )
    return info
