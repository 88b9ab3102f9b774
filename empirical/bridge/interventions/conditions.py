"""The interventions at a spike (issue #36 item 4; docs/attribution.md, "`intervene`"): what
each condition changes in the training (`CONDITIONS`: train.freeze / train.project_out,
empirical/train/constraints.py; `project_g1` projects out the G1 direction that
run_interventions writes). No torch here.

    member_configs(cfg, ["none", ...], 20, direction_file)   # [(condition, replicate, cfg)]
"""

from __future__ import annotations

from dataclasses import replace

from empirical.model.groups import group_of

CONDITIONS: dict[str, dict] = {
    "none": {},
    "freeze_layer2_qk": {"freeze": ("layer2_qk",)},
    "freeze_layer1_embed": {"freeze": ("W_E", "W_pos", "layer1_qk", "layer1_ov")},
    "project_g1": {"project_out": True},
    # controls (issue #45): freezes of other pieces, the MLP larger than layer 1 and the
    # embeddings together (131 072 entries against 77 056 in the authors' model), layer 2's
    # OV smaller (32 768): a spike that survives them was not stopped by freezing as such
    "freeze_mlp": {"freeze": ("mlp",)},
    "freeze_layer2_ov": {"freeze": ("layer2_ov",)},
}


def frozen_entries(model, name: str) -> int:
    """How many weights condition `name` freezes in `model` (0 for the others)."""
    from_groups = set(CONDITIONS[name].get("freeze", ()))
    return sum(p.numel() for n, p in model.named_parameters()
               if group_of(n, model.cfg.n_layers) in from_groups)  # fmt: skip


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

