"""Each parameter group's observed change across a window against a prediction, as compare-qk
holds W_QK's update against G1: the cosine in a frame where the prediction is exact, and the
sign-randomised null (docs/attribution.md, "Each piece against its first-order theory").
`predicted[group]` is in its reader's frame (`default_readers`): layer2_qk in compare-qk's dual
frame at the window's start, every other group flattened in parameter space.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from empirical.bridge.attribution.options import NULL_DRAWS
from empirical.bridge.compare_qk.coords import coordinates, theorem_w
from empirical.bridge.compare_qk.frames import Frames
from empirical.bridge.compare_qk.metrics import cosine
from empirical.model.groups import groups_of_names
from empirical.model.transformer import AssignAddTransformer

NULL_CHUNK = 100

Reader = Callable[[object, Mapping[str, Tensor], Mapping[str, Tensor]], np.ndarray]


def _model(cfg, w: Mapping[str, Tensor]) -> AssignAddTransformer:
    model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed)
    state = model.state_dict()
    model.load_state_dict({k: w[k].to(state[k].dtype) if k in w else state[k] for k in state})
    return model


def read_layer2_qk_dual(cfg, w_a, w_b) -> np.ndarray:
    """The change of layer-2 W_QK, read in compare-qk's dual frame at the window's start."""
    a, b = _model(cfg, w_a), _model(cfg, w_b)
    task = cfg.task
    frames = Frames(coordinates(a, task.p, task.K, task.L))
    return frames.read(theorem_w(b) - theorem_w(a), "dual")


def param_reader(group: str) -> Reader:
    """The group's parameter-space change, flattened in the groups' order (float64)."""

    def read(cfg, w_a, w_b) -> np.ndarray:
        names = groups_of_names(list(w_a))[group]
        parts = [(w_b[n].double() - w_a[n].double()).reshape(-1) for n in names]
        return torch.cat(parts).numpy()

    read.frame = "param"
    return read


read_layer2_qk_dual.frame = "dual"


def default_readers(names) -> dict[str, Reader]:
    """group -> reader: layer2_qk in the dual frame, every other group in parameter space."""
    readers: dict[str, Reader] = {g: param_reader(g) for g in groups_of_names(list(names))}
    readers["layer2_qk"] = read_layer2_qk_dual
    return readers


def compare_piece(observed: np.ndarray, predicted: np.ndarray, draws: int = NULL_DRAWS) -> dict:
    """One group: the cosine of the observed change with the prediction, the 95% level of
    |cos| under random signs (compare-qk's sign null, drawn in chunks so that a group of 10^5
    entries fits in memory) and the share of sign draws whose |cos| reaches the observed |cos|
    (p_sign, with the +1 correction)."""
    x = np.asarray(predicted, float).ravel()
    y = np.asarray(observed, float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"predicted has {x.size} entries, the observed change {y.size}")
    c = cosine(x, y)
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    null95 = p = float("nan")
    if np.isfinite(c):
        rng, xy, null = np.random.default_rng(20), x * y, []
        for done in range(0, draws, NULL_CHUNK):
            signs = rng.integers(0, 2, size=(min(NULL_CHUNK, draws - done), x.size)) * 2.0 - 1.0
            null.append(np.abs(signs @ xy) / (nx * ny))
        null = np.concatenate(null)
        null95 = float(np.quantile(null, 0.95))
        p = float((1 + (null >= abs(c)).sum()) / (1 + draws))
    return {
        "cos": c, "null95": null95, "p_sign": p,
        "beats_null": bool(np.isfinite(c) and abs(c) > null95),
        "norm_observed": float(ny), "norm_predicted": float(nx), "entries": int(x.size),
    }  # fmt: skip


def compare_pieces(cfg, w_a: Mapping[str, Tensor], w_b: Mapping[str, Tensor],
                   predicted: Mapping[str, np.ndarray], readers: Mapping[str, Reader] | None = None,
                   draws: int = NULL_DRAWS) -> dict[str, dict]:  # fmt: skip
    """Every group with a prediction: its observed change from `w_a` to `w_b` (weights of
    `cfg`'s model, {parameter name: tensor}) read by its reader, against `predicted[group]`
    (`compare_piece`), with the frame named."""
    readers = dict(readers or default_readers(w_a))
    out = {}
    for group, pred in predicted.items():
        if group not in readers:
            raise ValueError(f"no reader for group {group!r}; known: {', '.join(readers)}")
        read = readers[group]
        entry = compare_piece(read(cfg, w_a, w_b), pred, draws)
        entry["frame"] = getattr(read, "frame", "custom")
        out[group] = entry
    return out
