"""The model just before and just after each accuracy spike (paper Section 6, Figures 8, 9c
and 9d), from two snapshots of a run; what is measured at each and how the default steps are
chosen: docs/analysis.md, "Before and after a spike".

    steps = default_compare_steps(phases, run_dir.snapshot_steps(), records)  # detected
    first = compare_first_spike(run_dir, data, (5301, 5401))        # Figure 8
    second = compare_second_spike(run_dir, data, (14501, 16001))    # Figure 9c / 9d
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from empirical.analysis.authors import diagonal_margin, qk2_ov1_var_matrix_authors
from empirical.analysis.common import light_forward, token_labels
from empirical.analysis.probe_data import ProbeData
from empirical.analysis.progress import _second_spike
from empirical.analysis.qk import qk2_ov1_identity
from empirical.model.checkpoint import load_model
from empirical.model.circuits import ov_applies
from empirical.runs.phases import RESTRICTED_SETS, mean_series
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.registry import family_of
from empirical.task.vocab import TokenizeError

# the paper authors' example of Figure 8 (checkpoint_add_restricted_early_analysis.py)
PAPER_FIGURE8_EXAMPLE = "pad pad a 40 pad j 18 pad pad pad k 9 + a 27 ="
PAPER_FIRST_SPIKE_STEPS = (5301, 5401)
PAPER_SECOND_SPIKE_STEPS = (14501, 16001)


# -- which steps ----------------------------------------------------------------------------
def bracket(a: int, b: int, steps: list[int]) -> tuple[int, int] | None:
    """(last snapshot step <= a, first snapshot step >= b), or None if either is missing or
    they coincide."""
    before = [s for s in steps if s <= a]
    after = [s for s in steps if s >= b]
    if not before or not after or before[-1] >= after[0]:
        return None
    return before[-1], after[0]


def _onset(records: list[dict], rise: dict, names: tuple[str, ...], share: float) -> int:
    """The last evaluation step of the spike's window before its series first rises by
    `share` of the spike's gain above the window's first value."""
    steps, values = mean_series(records, names)
    inside = [(s, v) for s, v in zip(steps, values, strict=True)
              if rise["start_step"] <= s <= rise["end_step"]]  # fmt: skip
    if not inside:
        return rise["start_step"]
    level = inside[0][1] + share * rise["gain"]
    prev = inside[0][0]
    for s, v in inside:
        if v > level:
            return prev
        prev = s
    return rise["start_step"]


def default_compare_steps(
    phases, steps: list[int], records: list[dict] | None = None, onset_share: float = 0.1
) -> dict[str, tuple[int, int] | None]:
    """{"first_spike": (A, B), "second_spike": (C, D)} from a Phases object (or its dict),
    as snapshot steps, None where the spike was not detected or no snapshots bracket it: the
    paper's steps where the run has them inside the detected window; else the snapshots
    bracketing the first spike's largest jump, and the second spike from its onset (the
    series up by `onset_share` of the gain; the window start without `records`) to the end
    of its window."""
    out: dict[str, tuple[int, int] | None] = {"first_spike": None, "second_spike": None}
    if phases is None:
        return out
    d = phases if isinstance(phases, dict) else phases.to_dict()
    have = set(steps)
    for key, paper in (
        ("first_spike", PAPER_FIRST_SPIKE_STEPS),
        ("second_spike", PAPER_SECOND_SPIKE_STEPS),
    ):
        rise = d.get(key)
        if not rise:
            continue
        if set(paper) <= have and rise["start_step"] <= paper[0] < paper[1] <= rise["end_step"]:
            out[key] = paper
        elif key == "first_spike":
            a = rise.get("jump_start_step") or rise["start_step"]
            b = rise.get("jump_end_step") or rise["end_step"]
            out[key] = bracket(a, b, steps)
        else:
            a = _onset(records, rise, RESTRICTED_SETS, onset_share) if records else None
            out[key] = bracket(a or rise["start_step"], rise["end_step"], steps)
    return out


def chosen_compare_steps(run_dir: RunDir, phases, records, first, second) -> dict:
    """The two snapshots compared around each spike: `first` / `second` are (A, B), "auto"
    (`default_compare_steps`) or None (skip). A step without a snapshot is a RunDirError,
    raised before any work."""
    snaps = run_dir.snapshot_steps()
    auto = default_compare_steps(phases, snaps, records)
    out = {}
    for key, given in (("first_spike", first), ("second_spike", second)):
        if given == "auto":
            out[key] = auto[key]
        elif given is None:
            out[key] = None
        else:
            a, b = (int(x) for x in given)
            missing = [s for s in (a, b) if s not in snaps]
            if missing:
                raise RunDirError(
                    f"{run_dir}: no snapshot for step {missing[0]} ({key.replace('_', ' ')} "
                    f"comparison); snapshots: {snaps[:4]}...{snaps[-3:]}"
                )
            out[key] = (a, b)
    return out


# -- example sequences ----------------------------------------------------------------------
def batch_from_tokens(task: TaskConfig, tokens: torch.Tensor) -> Batch:
    """A Batch of well-formed sequences [n, L] (labels, operand values and positions,
    variables), resolved through their assignments."""
    tokens = torch.as_tensor(tokens, dtype=torch.long).reshape(-1, task.L)
    p, L = task.p, task.L
    rows = []
    for seq in tokens.tolist():
        where = {seq[i]: i + 1 for i in range(L - 5) if p <= seq[i] < p + task.K}
        vals, pos, var = [], [], []
        for j in (L - 3, L - 2):
            t = seq[j]
            if t < p:
                vals.append(t), pos.append(j), var.append(-1)
            else:
                if t not in where:
                    raise TokenizeError(f"operand at position {j} is never assigned")
                vals.append(seq[where[t]]), pos.append(where[t]), var.append(t - p)
        rows.append((vals, pos, var))
    vals = torch.tensor([r[0] for r in rows])
    pos = torch.tensor([r[1] for r in rows])
    var = torch.tensor([r[2] for r in rows])
    return Batch(tokens=tokens, labels=vals.sum(1) % p, n_vars=(var >= 0).sum(1),
                 operand_values=vals, value_positions=pos, operand_vars=var)  # fmt: skip


def _pick(task: TaskConfig, batch: Batch, mask: torch.Tensor, n_assign: int = 3) -> Batch:
    counts = (batch.tokens[:, : task.L - 4] < task.p).sum(1)
    idx = torch.nonzero(mask).reshape(-1)
    if not len(idx):
        raise ValueError("no probe sequence of the wanted kind")
    i = int(idx[(counts[idx] - n_assign).abs().argmin()])
    return batch[torch.tensor([i])]


def first_spike_example(task: TaskConfig, data: ProbeData, text: str | None = None) -> Batch:
    """The Figure-8 example: `text` if given, else the paper's sequence if the task holds it,
    else a probe sequence with a variable as the first operand and a number second."""
    vocab = family_of(task).vocabulary(task)
    for candidate in (text, None if text else PAPER_FIGURE8_EXAMPLE):
        if candidate:
            try:
                return batch_from_tokens(task, vocab.encode(candidate)[None])
            except (TokenizeError, ValueError):
                if text:
                    raise
    t = data.test
    return _pick(task, t, (t.operand_vars[:, 0] >= 0) & (t.operand_vars[:, 1] < 0))


def restricted_letter(task: TaskConfig) -> str | None:
    """The variable the paper follows at the second operand: b if it is never second in
    training (task.r2), else r2's first; None without a restricted variable."""
    if not task.r2:
        return None
    return "b" if "b" in task.r2 else task.r2[0]


def second_spike_example(task: TaskConfig, data: ProbeData, letter: str) -> Batch:
    """A probe sequence with `letter` as the second operand and a number first."""
    s = data.second
    v = task.letters.index(letter)
    return _pick(task, s, (s.operand_vars[:, 1] == v) & (s.operand_vars[:, 0] < 0))


# -- one step -------------------------------------------------------------------------------
def _load(run_dir: RunDir, step: int):
    path = run_dir.snapshot(step)
    if not path.exists():
        have = [s for s, _ in run_dir.snapshots()]
        raise RunDirError(
            f"{run_dir}: no snapshot for step {step} (snapshots: {have[:3]}...{have[-3:]})"
        )
    model = load_model(path)
    model.eval()
    return model


@torch.no_grad()
def first_spike_state(model, task: TaskConfig, data: ProbeData, example: Batch) -> dict:
    """What Figure 8 shows at one step: the example's layer-1 pattern, where `=`'s layer-1
    attention goes in 1-var sequences, the variable matrices (the authors' and ours)."""
    L = task.L
    ex = light_forward(model, example.tokens)
    one = data.test[data.test.n_vars == 1]
    fw = light_forward(model, one.tokens)
    row = fw.pattern1[:, L - 1]  # [n, L]
    is_var = one.operand_vars.to(row.device) >= 0  # [n, 2]
    ops = row[:, L - 3 : L - 1]
    on_var = (ops * is_var).sum(-1)
    on_num = (ops * ~is_var).sum(-1)
    correct = fw.logits.argmax(-1) == one.labels.to(fw.logits.device)
    S, ours = _variable_matrices(model, task)
    hit = S.argmax(-1) == torch.arange(task.K, device=S.device)
    return {
        "example_pattern1": ex.pattern1[0].cpu(),
        "example_prediction": int(ex.logits[0].argmax()),
        "l1_eq_on_variable_operand": on_var.mean().item(),
        "l1_eq_on_number_operand": on_num.mean().item(),
        "l1_eq_elsewhere": (1 - on_var - on_num).mean().item(),
        "l1_eq_variable_above_number": (on_var > on_num).double().mean().item(),
        "accuracy_1var": correct.double().mean().item(),
        "n_1var": len(one),
        "S_authors": S.cpu(),
        "identity_authors": hit.double().mean().item() if bool(S.isfinite().all()) else math.nan,
        "diag_margin_authors": diagonal_margin(S),
        "S_ours": ours["matrix"],
        "identity_ours": ours["identity_score"],
        "diag_margin_ours": ours["margin_mean"],
    }


def _variable_matrices(model, task: TaskConfig) -> tuple[torch.Tensor, dict]:
    """(the authors' variable matrix, ours: qk2_ov1_identity) of layer 2's head that ours
    picks (one head: its own); NaN matrices where there is no W_OV (HYLA: docs/heads.md)."""
    if ov_applies(model.cfg) is not None:
        nan = torch.full((task.K, task.K), math.nan)
        return nan, {"matrix": nan, "identity_score": math.nan, "margin_mean": math.nan}
    ours = qk2_ov1_identity(model, task)
    return qk2_ov1_var_matrix_authors(model, task, ours.get("head")), ours


def operand_attention_by_variable(task: TaskConfig, batch: Batch, fw) -> dict:
    """Per operand position (first L-3, second L-2) and variable v there: the mean layer-1
    attention of `=` on that position, the share of those sequences where it is below 1/4
    (what fails our attn_l1_equal_to_operands), the mean layer-2 attention of `=` on v's
    assigned number, the accuracy, and their count."""
    L = task.L
    dev = fw.pattern1.device
    att = fw.pattern1[:, L - 1, L - 3 : L - 1]
    vals = fw.pattern2.gather(1, batch.value_positions.to(dev))  # [B, 2]
    correct = (fw.logits.argmax(-1) == batch.labels.to(dev)).double()
    out = {}
    for j, side in enumerate(("first", "second")):
        v = batch.operand_vars[:, j].to(dev)
        out[side] = {}
        for i, letter in enumerate(task.letters):
            m = v == i
            if bool(m.any()):
                a = att[m, j]
                out[side][letter] = {
                    "l1_eq_attention": a.mean().item(),
                    "share_below_quarter": (a < 0.25).double().mean().item(),
                    "l2_eq_on_value": vals[m, j].mean().item(),
                    "accuracy": correct[m].mean().item(),
                    "n": int(m.sum()),
                }
    return out


@torch.no_grad()
def second_spike_state(model, task: TaskConfig, data: ProbeData, example: Batch) -> dict:
    """What Figure 9c / 9d show at one step (per variable as the second operand, and the
    example's `=` rows), and per variable at either operand position `=`'s attention on it."""
    fw = light_forward(model, data.second.tokens)
    per_var = _second_spike(task, data.second, fw)
    ex = light_forward(model, example.tokens)
    fw_test = light_forward(model, data.test.tokens)
    return {
        "per_variable": per_var,
        "operand_attention": operand_attention_by_variable(task, data.test, fw_test),
        "example_eq_layer1": ex.pattern1[0, task.L - 1].cpu(),
        "example_eq_layer2": ex.pattern2[0].cpu(),
        "example_prediction": int(ex.logits[0].argmax()),
    }


# -- two steps ------------------------------------------------------------------------------
def _example_info(task: TaskConfig, example: Batch) -> dict:
    vocab = family_of(task).vocabulary(task)
    tokens = example.tokens[0]
    return {
        "text": vocab.decode_tokens(tokens),
        "labels": token_labels(vocab, tokens),
        "answer": int(example.labels[0]),
        "value_positions": example.value_positions[0].tolist(),
        "operand_vars": example.operand_vars[0].tolist(),
    }


def compare_first_spike(run_dir: str | Path | RunDir, data: ProbeData, steps: tuple[int, int],
                        example: str | None = None) -> dict:  # fmt: skip
    """Figure 8's quantities at the two snapshot `steps` (before, after)."""
    run_dir = RunDir(run_dir)
    task = data.task
    ex = first_spike_example(task, data, example)
    states = {int(s): first_spike_state(_load(run_dir, s), task, data, ex) for s in steps}
    return {
        "steps": [int(s) for s in steps],
        "example": _example_info(task, ex),
        "letters": list(task.letters),
        "states": states,
    }


def compare_second_spike(
    run_dir: str | Path | RunDir, data: ProbeData, steps: tuple[int, int]
) -> dict | None:
    """Figures 9c / 9d's quantities at the two snapshot `steps` (before, after); None when
    the task has no variable restricted from the second position."""
    run_dir = RunDir(run_dir)
    task = data.task
    letter = restricted_letter(task)
    if letter is None:
        return None
    ex = second_spike_example(task, data, letter)
    states = {int(s): second_spike_state(_load(run_dir, s), task, data, ex) for s in steps}
    return {
        "steps": [int(s) for s in steps],
        "letter": letter,
        "restricted": list(task.r2),
        "example": _example_info(task, ex),
        "states": states,
    }


def comparison_numbers(cmp: dict | None) -> dict | None:
    """The JSON part of a comparison (the matrices and patterns kept, as lists)."""
    if cmp is None:
        return None
    states = {
        str(step): {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in st.items()}
        for step, st in cmp["states"].items()
    }
    return {k: v for k, v in cmp.items() if k != "states"} | {"states": states}
