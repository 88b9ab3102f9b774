"""Each parameter group's change across a window against its first-order predictions at the
window's start (issue #36 item 5; docs/attribution.md, "Each piece against its first-order
theory"): per loss (`train`, `loss/1var/ind`) minus the gradient, its sign and (replayed
windows) AdamW's preconditioned gradient; G1 for layer-2 W_QK.

    out = first_order(cfg, targets, w_A, w_B)   # out["train"]["gradient"]["layer1_ov"]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from empirical.bridge.attribution.against_theory import (
    _model,
    compare_pieces,
    param_reader,
    read_layer2_qk_dual,
)
from empirical.bridge.attribution.options import NULL_DRAWS
from empirical.bridge.compare_qk.metrics import sign_null95
from empirical.bridge.compare_qk.snapshot import g1_direction
from empirical.model.groups import groups_of_names

PREDICTIONS = ("gradient", "sign", "adam")


def _flat(grads: Mapping[str, Tensor], names: list[str]) -> np.ndarray:
    return torch.cat([grads[n].reshape(-1) for n in names]).numpy()


def first_order(cfg, targets, w_a: Mapping[str, Tensor], w_b: Mapping[str, Tensor],
                g1: bool = True, adam: Mapping[str, Tensor] | None = None,
                draws: int = NULL_DRAWS) -> dict:  # fmt: skip
    """{loss: {prediction: {group: comparison}}, "g1": {...} or {"error": why}} for the
    training loss and the 1-var loss (module docstring); `draws` random sign patterns for
    each comparison's sign null."""
    task = cfg.task
    mix = {"loss/0var/ind": task.frac_0var, "loss/1var/ind": task.frac_1var,
           "loss/2var/ind": task.frac_2var}  # fmt: skip
    mix = {t: wt for t, wt in mix.items() if wt > 0}
    missing = [t for t in mix if t not in targets.names]
    if missing:
        raise ValueError(f"the first-order comparison needs the sets {', '.join(missing)}")
    grads = targets.gradients(w_a, list(mix))
    groups = groups_of_names(list(w_a))
    losses = {
        "train": {n: sum(wt * grads[t][n] for t, wt in mix.items()) for n in w_a},
        "loss/1var/ind": grads["loss/1var/ind"],
    }
    readers = {g: param_reader(g) for g in groups}
    out: dict = {}
    for t, grad in losses.items():
        minus = {g: -_flat(grad, members) for g, members in groups.items()}
        signs = {g: np.sign(v) for g, v in minus.items()}
        out[t] = {
            "gradient": compare_pieces(cfg, w_a, w_b, minus, readers, draws),
            "sign": compare_pieces(cfg, w_a, w_b, signs, readers, draws),
        }
        if adam:
            scaled = {n: grad[n] / adam[n] for n in grad}
            pre = {g: -_flat(scaled, members) for g, members in groups.items()}
            out[t]["adam"] = compare_pieces(cfg, w_a, w_b, pre, readers, draws)
    if g1:
        out["g1"] = _g1(cfg, w_a, w_b, draws)
    return out


def _g1(cfg, w_a, w_b, draws: int) -> dict:
    """G1's comparison with layer-2 W_QK's change; its null is compare-qk's own (`sign_null95`:
    its sign draws), so that the two commands give one number for one window (the null of
    this module's `draws` kept beside it as null95_draws)."""
    try:
        G, _, _, info = g1_direction(cfg, _model(cfg, w_a))
    except ValueError as exc:
        return {"error": str(exc)}
    out = compare_pieces(cfg, w_a, w_b, {"layer2_qk": G}, draws=draws)
    entry = out["layer2_qk"]
    null = sign_null95(G, read_layer2_qk_dual(cfg, w_a, w_b))
    entry.update({"null95_draws": entry["null95"], "null95": null, "null": "compare-qk's",
                  "beats_null": bool(abs(entry["cos"]) > null)})  # fmt: skip
    return {**out, "at": info}


def first_order_rows(result: dict) -> list[tuple[str, str, str, dict]]:
    """(target, prediction, group, comparison) for every comparison of a `first_order`
    result, G1's as (target "theorem", prediction "g1", "layer2_qk")."""
    rows = []
    for t, by_prediction in result.items():
        if t == "g1":
            if "layer2_qk" in by_prediction:
                rows.append(("theorem", "g1", "layer2_qk", by_prediction["layer2_qk"]))
            continue
        for kind, by_group in by_prediction.items():
            rows += [(t, kind, g, c) for g, c in by_group.items()]
    return rows
