"""The interventions at a spike (issue #36 item 4): what each condition changes in the
training, and the G1 direction the last one projects out.

    CONDITIONS["freeze_layer2_qk"]            # {"freeze": ("layer2_qk",)}
    g1 = g1_direction(run_dir, model)         # G1 in compare-qk's dual frame at `model`
    member_configs(cfg, ["none", ...], 20, direction_file)   # [(condition, replicate, cfg)]

| condition | what changes (train.freeze / train.project_out, empirical/train/constraints.py) |
| --- | --- |
| `none` | nothing: the run's own training from the checkpoint, another data order |
| `freeze_layer2_qk` | layer-2 W_Q, W_K never change (the associative memory cannot grow) |
| `freeze_layer1_embed` | W_E, W_pos and layer 1 (QK, OV) never change (the memory's vectors stay) |
| `project_g1` | every W_QK update loses its G1 component (dual frame at the step's start) |
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

CONDITIONS: dict[str, dict] = {
    "none": {},
    "freeze_layer2_qk": {"freeze": ("layer2_qk",)},
    "freeze_layer1_embed": {"freeze": ("W_E", "W_pos", "layer1_qk", "layer1_ov")},
    "project_g1": {"project_out": True},
}


def check_conditions(names) -> list[str]:
    out = []
    for n in names:
        if n not in CONDITIONS:
            raise ValueError(f"condition {n!r}: allowed {', '.join(CONDITIONS)}")
        out.append(n)
    if not out:
        raise ValueError(f"no condition; allowed {', '.join(CONDITIONS)}")
    return out


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


def g1_direction(cfg, model, batch_size: int = 2048, prediction_size: int = 16384):
    """(G1 in compare-qk's dual frame at `model` [R, C], rows, cols, info): the theory's
    first-order W_QK gradient at the checkpoint's measured attention (a, b), as compare-qk
    predicts it (its default options but the sizes)."""
    from empirical.bridge.compare_qk.observe import one_var_batch
    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.prediction import make_predictor
    from empirical.bridge.compare_qk.snapshot import analyse_snapshot
    from empirical.task import held_out_pairs

    opts = Options(batch_size=batch_size, prediction_size=prediction_size)
    task = cfg.task
    held = held_out_pairs(task, cfg.seed) if opts.distribution == "train" else None
    batch = one_var_batch(
        task, opts.batch_size, opts.seed, opts.order, opts.distribution, held, opts.all_assigned
    )  # fmt: skip (as compare-qk's SnapshotInputs.of)
    predict = make_predictor(task, opts, held_out=held)
    scalars, blocks = analyse_snapshot(model, task, batch, opts, None, predict)
    from empirical.model.labels import col_labels, row_labels

    G = np.asarray(blocks["pred_dual"], dtype=float)
    if not np.isfinite(G).all():
        raise ValueError(
            f"G1 is not defined at this checkpoint (measured a = {scalars['a']:.3g}, "
            f"b = {scalars['b']:.3g}: needs 0 < a < 0.5 and b > 0)"
        )
    info = {"a": scalars["a"], "b": scalars["b"], "prediction": scalars["prediction"]}
    return G, row_labels(task.K, task.L), col_labels(task.p, task.K, task.L), info


def write_g1_direction(cfg, model, path: Path, **sizes) -> dict:
    """g1_direction written as a train.project_out file (constraints.save_direction)."""
    from empirical.train.constraints import save_direction

    G, rows, cols, info = g1_direction(cfg, model, **sizes)
    save_direction(
        path, G, rows, cols, f"G1 (dual frame), a = {info['a']:.4g}, b = {info['b']:.4g}"
    )
    return info
