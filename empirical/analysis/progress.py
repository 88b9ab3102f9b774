"""The seven progress measures of the paper's Appendix B, and the second-spike scores of
Section 6 (Figure 9), per model and over a run's snapshots. Each is in [0, 1]; `MEASURES`
gives its threshold and one-line definition (also in docs/analysis.md). Several heads: the
attention measures read the layer's (heads') mean pattern, the QK measures the best head,
the OV maps are summed over the heads; HYLA's OV measures are NaN (docs/heads.md).

    data = make_probe_data(task, seed)                 # once
    values = progress_measures(model, data)            # {name: value}
    history = progress_over_training(run_dir, data)    # every snapshot of a run
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from empirical.analysis.authors import (
    AUTHORS_MEASURES,
    SUFFIX,
    _l2_equal_to_values,
    authors_measures,
)
from empirical.analysis.common import (
    LightForward,
    light_forward,
    number_features,
    prev_token_share,
)
from empirical.analysis.ov_mlp import ov2_mlp2_accuracy
from empirical.analysis.probe_data import ProbeData
from empirical.analysis.probes import train_linear_probe
from empirical.analysis.qk import qk1_num_to_prev_var, qk2_ov1_var_identity
from empirical.model.checkpoint import load_model
from empirical.model.circuits import ov_applies
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig

# name -> (threshold, one-line definition)
MEASURES: dict[str, tuple[float, str]] = {
    "ov2_mlp2_accuracy": (
        0.9,
        "accuracy over all p^2 operand pairs of the isolated layer-2 OV-MLP circuit, "
        "argmax (v + MLP(v)) W_U with v = (W_E[x] + W_E[y]) W_OV^2 / 2",
    ),
    "qk1_num_to_prev_var": (
        0.9,
        "fraction of (number n, position t in 3..L-5) for which the layer-1 score "
        "(W_E[n] + W_pos[t]) W_QK^1 W_pos[s] over s in {0..t-1} minus {t-2} is strictly "
        "largest at s = t-1",
    ),
    "qk2_ov1_var_identity": (
        1.0,
        "fraction of variables u for which S[u, v] = (W_E[=] + W_pos[L-1] + ebar_u) W_QK^2 "
        "(nbar + ebar_v)^T, ebar = W_E[var] W_OV^1, is strictly largest at v = u",
    ),
    "attn_l1_equal_to_operands": (
        0.9,
        "fraction of probe sequences with a variable operand in which every variable "
        "operand position (L-3, L-2) gets at least 1/4 of `=`'s layer-1 attention",
    ),
    "attn_l1_num_to_prev": (
        0.9,
        "fraction of assigned numbers (positions 1..L-5) whose layer-1 attention is "
        "strictly largest on the previous token (their variable)",
    ),
    "attn_l2_equal_to_values": (
        0.9,
        "fraction of probe sequences whose `=` layer-2 attention has its top-m positions "
        "equal to the m distinct value positions of the operands (m = 2, or 1 for `c+c`)",
    ),
    "probe_l1_var_from_num": (
        0.9,
        "held-out accuracy of a linear probe (logistic regression) classifying the "
        "assigned variable from the residual after layer 1 at assigned-number positions",
    ),
}
MEASURE_NAMES = tuple(MEASURES)
# ours and the authors' definitions (`NAME@authors`, empirical.analysis.authors)
ALL_MEASURES: dict[str, tuple[float, str]] = MEASURES | AUTHORS_MEASURES
ALL_MEASURE_NAMES = tuple(ALL_MEASURES)
# the routing measures that the paper says plateau at 80-99% between the two spikes
ROUTING_MEASURES = ("qk2_ov1_var_identity", "attn_l1_equal_to_operands", "attn_l2_equal_to_values")


# -- the measures from a light forward pass ---------------------------------------------
def _l1_equal_to_operands(task: TaskConfig, batch: Batch, fw: LightForward) -> float:
    L = task.L
    dev = fw.pattern1.device
    is_var = batch.operand_vars.to(dev) >= 0  # [B, 2]
    has_var = is_var.any(-1)
    if not bool(has_var.any()):
        return float("nan")
    att = fw.pattern1[:, L - 1, L - 3 : L - 1]  # [B, 2]
    ok = ((att >= 0.25) | ~is_var).all(-1)
    return ok[has_var].double().mean().item()


PROBE_MAX_TRAIN = 2048  # assigned numbers the variable probe trains on (plenty for K classes)


def _probe_var_from_num(task, train: Batch, fw_train, test: Batch, fw_test, steps=50) -> float:
    Xtr, ytr = number_features(task, train, fw_train)
    Xte, yte = number_features(task, test, fw_test)
    Xtr, ytr = Xtr[:PROBE_MAX_TRAIN], ytr[:PROBE_MAX_TRAIN]
    return train_linear_probe(Xtr, ytr, Xte, yte, task.K, steps=steps).test_acc


# -- public single-measure functions ----------------------------------------------------
def attn_l1_equal_to_operands(model, task: TaskConfig, batch: Batch) -> float:
    return _l1_equal_to_operands(task, batch, light_forward(model, batch.tokens))


def attn_l1_num_to_prev(model, task: TaskConfig, batch: Batch) -> float:
    return prev_token_share(task, batch, light_forward(model, batch.tokens))


def attn_l2_equal_to_values(model, task: TaskConfig, batch: Batch) -> float:
    return _l2_equal_to_values(batch, light_forward(model, batch.tokens))  # the authors' rule


def probe_l1_var_from_num(model, task: TaskConfig, train: Batch, test: Batch) -> float:
    fw_tr, fw_te = light_forward(model, train.tokens), light_forward(model, test.tokens)
    return _probe_var_from_num(task, train, fw_tr, test, fw_te)


# -- second spike (Figure 9) ------------------------------------------------------------
def _second_spike(task: TaskConfig, batch: Batch, fw: LightForward) -> dict:
    L = task.L
    dev = fw.pattern1.device
    var2 = batch.operand_vars[:, 1].to(dev)
    vpos = batch.value_positions[:, 1].to(dev)
    l1 = fw.pattern1[:, L - 1, L - 2]
    l2 = fw.pattern2.gather(1, vpos[:, None]).squeeze(1)
    correct = (fw.logits.argmax(-1) == batch.labels.to(dev)).double()
    out = {}
    for v, letter in enumerate(task.letters):
        m = var2 == v
        n = int(m.sum())
        if n == 0:
            continue
        out[letter] = {
            "l1_eq_to_second": l1[m].mean().item(),
            "l2_eq_to_second_value": l2[m].mean().item(),
            "accuracy": correct[m].mean().item(),
            "n": n,
        }
    return out


def second_spike_scores(model, task: TaskConfig, batch: Batch) -> dict:
    """Per variable v (sequences with v as second operand): mean layer-1 attention from `=`
    to position L-2, mean layer-2 attention from `=` to the number assigned to v, accuracy."""
    return _second_spike(task, batch, light_forward(model, batch.tokens))


# -- all of them at once ----------------------------------------------------------------
@torch.no_grad()
def progress_measures(model, data: ProbeData, with_second_spike: bool = False):
    """All seven measures on `data` and, when `data.authors` is set, the seven `@authors`
    variants (one light forward pass over every batch). With `with_second_spike`, returns
    (measures, second_spike_scores)."""
    task = data.task
    batches = [data.test, data.train, data.second]
    if data.authors is not None:
        batches += [data.authors.eval, data.authors.train, data.authors.test]
    fw = light_forward(model, torch.cat([b.tokens for b in batches]))
    parts, start = [], 0
    for b in batches:
        parts.append(fw.rows(start, start + len(b)))
        start += len(b)
    fw_te, fw_tr, fw_2 = parts[:3]
    ov = ov_applies(model.cfg) is None  # HYLA: the OV measures are not defined (NaN)
    nan = float("nan")
    values = {
        "ov2_mlp2_accuracy": ov2_mlp2_accuracy(model, task) if ov else nan,
        "qk1_num_to_prev_var": qk1_num_to_prev_var(model, task),
        "qk2_ov1_var_identity": qk2_ov1_var_identity(model, task) if ov else nan,
        "attn_l1_equal_to_operands": _l1_equal_to_operands(task, data.test, fw_te),
        "attn_l1_num_to_prev": prev_token_share(task, data.test, fw_te),
        "attn_l2_equal_to_values": _l2_equal_to_values(data.test, fw_te),
        "probe_l1_var_from_num": _probe_var_from_num(task, data.train, fw_tr, data.test, fw_te),
    }
    if data.authors is not None:
        values |= authors_measures(model, task, data.authors, *parts[3:], seed=data.seed)
    if not with_second_spike:
        return values
    return values, _second_spike(task, data.second, fw_2)


# -- over a run's snapshots -------------------------------------------------------------
def crossing_steps(steps: list[int], values: list[float], threshold: float) -> dict:
    """first: the first step whose value is >= threshold; stable: the first step from which
    every later value is >= threshold (None if never)."""
    first = next((s for s, v in zip(steps, values, strict=True) if v >= threshold), None)
    stable = None
    for s, v in zip(reversed(steps), reversed(values), strict=True):
        if v >= threshold:
            stable = s
        else:
            break
    return {"threshold": threshold, "first": first, "stable": stable}


@dataclass
class ProgressHistory:
    steps: list[int]
    measures: dict[str, list[float]]
    second_spike: dict[str, dict[str, list[float]]]  # letter -> quantity -> per step
    crossings: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def progress_over_training(
    run_dir: str | Path, data: ProbeData, every: int = 1, progress: bool = False,
    snapshots: list[tuple[int, Path]] | None = None,
) -> ProgressHistory:  # fmt: skip
    """The seven measures and the second-spike scores at every `every`-th snapshot of
    `run_dir` (the last snapshot always included), with each measure's threshold crossings."""
    snaps = RunDir(run_dir).snapshots() if snapshots is None else snapshots
    if not snaps:
        raise RunDirError(f"{run_dir}: no snapshots (train.snapshot_every = 0?)")
    chosen = snaps[::every]
    if chosen[-1] != snaps[-1]:
        chosen.append(snaps[-1])
    t0 = time.perf_counter()
    steps: list[int] = []
    measures: dict[str, list[float]] = {}
    second: dict[str, dict[str, list[float]]] = {}
    for step, path in tqdm(chosen, desc="progress measures", disable=not progress):
        model = load_model(path)
        model.eval()
        values, spike = progress_measures(model, data, with_second_spike=True)
        steps.append(step)
        for name, value in values.items():
            measures.setdefault(name, []).append(value)
        for letter, d in spike.items():
            slot = second.setdefault(letter, {})
            for key, value in d.items():
                slot.setdefault(key, []).append(value)
    crossings = {
        name: crossing_steps(steps, series, ALL_MEASURES[name][0])
        for name, series in measures.items()
    }
    return ProgressHistory(steps, measures, second, crossings, time.perf_counter() - t0)


def window_levels(history: ProgressHistory, start: int, end: int) -> dict:
    """Per measure: mean, min and max over the snapshots with start <= step <= end (e.g.
    phase 2, between the two spikes), with their count and steps. Empty if none."""
    idx = [i for i, s in enumerate(history.steps) if start <= s <= end]
    if not idx:
        return {}
    out = {"start": start, "end": end, "n_snapshots": len(idx), "measures": {}}
    for name, series in history.measures.items():
        vals = [series[i] for i in idx if series[i] is not None and series[i] == series[i]]
        if vals:
            out["measures"][name] = {"mean": sum(vals) / len(vals), "min": min(vals),
                                     "max": max(vals)}  # fmt: skip
    return out


def phase2_levels(history: ProgressHistory | None, phases) -> dict | None:
    """Every measure's mean / min / max over the snapshots of phase 2, between the two spikes
    (from the end of the first spike's window to the start of the second's), and whether
    each routing measure (ROUTING_MEASURES, ours and the authors') stays within the paper's
    80-99% there. None without both spikes or without a snapshot between them."""
    if history is None or phases is None:
        return None
    first, second = phases.first_spike, phases.second_spike
    if first is None or second is None:
        return None
    levels = window_levels(history, first.end_step, second.start_step)
    if not levels:
        return None
    levels["routing"] = {}
    for base in ROUTING_MEASURES:
        for name in (base, base + SUFFIX):
            m = levels["measures"].get(name)
            if m is not None:
                levels["routing"][name] = {
                    **m,
                    "within_80_99": bool(0.8 <= m["min"] and m["max"] <= 0.99),
                    "mean_within_80_99": bool(0.8 <= m["mean"] <= 0.99),
                }
    return levels


def definition_agreement(history: ProgressHistory, suffix: str = "@authors") -> dict:
    """Per measure computed under both definitions: over the common snapshots, the mean and
    largest |ours - theirs| (and the step of the largest), the share of snapshots where
    they differ by more than 0.05, and both crossings of the threshold."""
    out = {}
    for name in MEASURE_NAMES:
        theirs = history.measures.get(name + suffix)
        ours = history.measures.get(name)
        if theirs is None or ours is None:
            continue
        pairs = [
            (step, a, b)
            for step, a, b in zip(history.steps, ours, theirs, strict=True)
            if a is not None and b is not None and a == a and b == b
        ]
        if not pairs:
            continue
        diffs = [abs(a - b) for _, a, b in pairs]
        worst = max(range(len(pairs)), key=diffs.__getitem__)
        out[name] = {
            "mean_abs_diff": sum(diffs) / len(diffs),
            "max_abs_diff": diffs[worst],
            "max_at_step": pairs[worst][0],
            "ours_there": pairs[worst][1],
            "theirs_there": pairs[worst][2],
            "share_diff_above_0.05": sum(d > 0.05 for d in diffs) / len(diffs),
            "crossing_ours": history.crossings.get(name),
            "crossing_theirs": history.crossings.get(name + suffix),
        }
    return out
