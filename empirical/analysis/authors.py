"""The paper authors' own definitions of the seven progress measures, as named variants
beside ours: `<our name>@authors` (e.g. `ov2_mlp2_accuracy@authors`).

Facts read from their progress_measures.py (GitHub bexoo/assign-and-add, commit 9cfc8b9; our
code is our own). Each definition, how it differs from ours, and their batches (drawn with our
sampler: empirical.analysis.probe_data.authors_batches): docs/analysis.md, "The authors'
definitions". Ties: we count an exact tie for the top as a failure (their argmax / topk breaks
ties by index).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from empirical.analysis.common import (
    LightForward,
    mlp_out,
    number_features,
    prev_token_share,
    strict_argmax_is,
    sums_mod_p,
)
from empirical.analysis.probe_data import AuthorsBatches
from empirical.model.circuits import layer_ov, ov_applies, qk_matrix
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import derive_seed

SUFFIX = "@authors"

# their probe's training (progress_measures.py)
PROBE_EPOCHS = 4
PROBE_LR = 1e-2
PROBE_WD = 1e-4

# name -> (threshold, one-line definition); thresholds as ours
AUTHORS_MEASURES: dict[str, tuple[float, str]] = {
    "ov2_mlp2_accuracy@authors": (
        0.9,
        "accuracy over all p^2 pairs of argmax MLP(W_E[x] W_OV^2 + W_E[y] W_OV^2) W_U "
        "(no skip term)",
    ),
    "qk1_num_to_prev_var@authors": (
        0.9,
        "fraction of query positions t = 1..L-5 whose positional score W_pos[t] W_QK^1 "
        "W_pos[s], s < t, s != t-2, is largest at s = t-1 (no token term; t = 1, 2 trivial)",
    ),
    "qk2_ov1_var_identity@authors": (
        1.0,
        "fraction of variables u for which ebar_u W_QK^2 ebar_v^T, ebar = W_E[var] W_OV^1, "
        "is largest at v = u (no `=`, position or number terms)",
    ),
    "attn_l1_equal_to_operands@authors": (
        0.9,
        "fraction of 0-/1-var sequences whose top-2 layer-1 attention from `=` is on "
        "positions L-3 and L-2",
    ),
    "attn_l1_num_to_prev@authors": (
        0.9,
        "fraction of numbers at positions 1..L-5 of 0-/1-var sequences whose layer-1 "
        "attention is largest on the previous token",
    ),
    "attn_l2_equal_to_values@authors": (
        0.9,
        "fraction of 0-/1-var sequences whose top-2 layer-2 attention from `=` is on the "
        "two operands' value positions",
    ),
    "probe_l1_var_from_num@authors": (
        0.9,
        "test accuracy of a linear probe (bias, Adam lr 1e-2, wd 1e-4, 4 full-batch epochs, "
        "raw features) for the assigned variable from the residual after layer 1 at numbers",
    ),
}
AUTHORS_MEASURE_NAMES = tuple(AUTHORS_MEASURES)


def base_name(name: str) -> str:
    """`ov2_mlp2_accuracy@authors` -> `ov2_mlp2_accuracy` (ours unchanged)."""
    return name.removesuffix(SUFFIX)


# -- weight-only measures (several heads: the OV maps summed over a layer's heads, the best
# head's QK, as ours: empirical.analysis.qk.by_best_head) -----------------------------------
def _best(model, measure) -> float:
    heads = range(model.cfg.n_heads) if model.cfg.n_heads > 1 else [None]
    return max(measure(h) for h in heads)


@torch.no_grad()
def ov2_mlp2_accuracy_authors(model, task: TaskConfig) -> float:
    EO = model.W_E[: task.p] @ layer_ov(model, 1)
    pred = (mlp_out(model, EO[:, None, :] + EO[None, :, :]) @ model.W_U).argmax(-1)
    return (pred == sums_mod_p(task.p, pred.device)).double().mean().item()


@torch.no_grad()
def qk1_positional_scores(model, task: TaskConfig, head: int | None = None) -> Tensor:
    """W_pos[t] W_QK^1 W_pos[s] for t, s in 0..L-5, [L-4, L-4]."""
    P = model.W_pos[: task.L - 4]
    return P @ qk_matrix(model, 0, head=head) @ P.T


def qk1_num_to_prev_var_authors(model, task: TaskConfig) -> float:
    return _best(model, lambda h: _num_to_prev_var(model, task, h))


@torch.no_grad()
def _num_to_prev_var(model, task: TaskConfig, head: int | None) -> float:
    S = qk1_positional_scores(model, task, head)
    n = S.shape[0]
    t = torch.arange(1, n, device=S.device)
    s = torch.arange(n, device=S.device)
    valid = (s[None, :] < t[:, None]) & (s[None, :] != t[:, None] - 2)
    hit = strict_argmax_is(S[t], t - 1, valid)
    return hit.double().mean().item()


@torch.no_grad()
def qk2_ov1_var_matrix_authors(model, task: TaskConfig, head: int | None = None) -> Tensor:
    """ebar W_QK^2 ebar^T over the K variables, [K, K] (their Figure 8 / 7b matrix)."""
    p, K = task.p, task.K
    ebar = model.W_E[p : p + K] @ layer_ov(model, 0)
    return ebar @ qk_matrix(model, 1, head=head) @ ebar.T


def qk2_ov1_var_identity_authors(model, task: TaskConfig) -> float:
    def identity(head):
        S = qk2_ov1_var_matrix_authors(model, task, head)
        hit = strict_argmax_is(S, torch.arange(S.shape[0], device=S.device))
        return hit.double().mean().item()

    return _best(model, identity)


def diagonal_margin(S: Tensor) -> float:
    """Mean over rows of S[u, u] - max_{v != u} S[u, v] (their `diag_margin`)."""
    K = S.shape[0]
    if K < 2:
        return 0.0
    eye = torch.eye(K, dtype=torch.bool, device=S.device)
    off = S.masked_fill(eye, float("-inf")).max(-1).values
    return (S.diagonal() - off).mean().item()


# -- measures on their batches, from a light forward pass ---------------------------------
def _top2_is(scores: Tensor, targets: Tensor) -> Tensor:
    """Per row: the two target positions [n, 2] (distinct) strictly beat every other."""
    at = scores.gather(1, targets)
    others = scores.scatter(1, targets, float("-inf")).max(-1).values
    return at.min(-1).values > others


def _l1_equal_to_operands(task: TaskConfig, fw: LightForward) -> float:
    L = task.L
    att = fw.pattern1[:, L - 1]
    targets = torch.tensor([L - 3, L - 2], device=att.device).expand(len(att), 2)
    return _top2_is(att, targets).double().mean().item()


def _l2_equal_to_values(batch: Batch, fw: LightForward) -> float:
    vp = batch.value_positions.to(fw.pattern2.device)
    return _top2_is(fw.pattern2, vp).double().mean().item()


def _probe_features(task: TaskConfig, batch: Batch, fw: LightForward):
    return number_features(task, batch, fw, first=1)


def adam_linear_probe(Xtr: Tensor, ytr: Tensor, Xte: Tensor, yte: Tensor, n_classes: int,
                      seed: int = 0, epochs: int = PROBE_EPOCHS, lr: float = PROBE_LR,
                      weight_decay: float = PROBE_WD) -> float:  # fmt: skip
    """Their probe: y = x W^T + b initialised as torch's nn.Linear (uniform in
    +-1/sqrt(fan_in), here from a seeded generator), `epochs` full-batch Adam steps on the
    cross-entropy with L2 `weight_decay` added to the gradient; test accuracy."""
    Xtr, Xte = Xtr.detach().float(), Xte.detach().float()
    d = Xtr.shape[1]
    gen = torch.Generator().manual_seed(seed)
    bound = 1.0 / math.sqrt(d)
    W = ((torch.rand(n_classes, d, generator=gen) * 2 - 1) * bound).to(Xtr.device)
    b = ((torch.rand(n_classes, generator=gen) * 2 - 1) * bound).to(Xtr.device)
    W.requires_grad_(True)
    b.requires_grad_(True)
    opt = torch.optim.Adam([W, b], lr=lr, weight_decay=weight_decay)
    ytr, yte = ytr.long().to(Xtr.device), yte.long().to(Xtr.device)
    with torch.enable_grad():
        for _ in range(epochs):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(Xtr @ W.T + b, ytr)
            loss.backward()
            opt.step()
    with torch.no_grad():
        if not len(yte):
            return 0.0
        return ((Xte @ W.T + b).argmax(-1) == yte).double().mean().item()


def authors_measures(model, task: TaskConfig, batches: AuthorsBatches, fw_eval: LightForward,
                     fw_train: LightForward, fw_test: LightForward,
                     seed: int = 0) -> dict[str, float]:  # fmt: skip
    """The seven `@authors` measures, given light forward passes over their three batches."""
    Xtr, ytr = _probe_features(task, batches.train, fw_train)
    Xte, yte = _probe_features(task, batches.test, fw_test)
    probe_seed = derive_seed(seed, "analysis", "authors-probe-init")
    ov = ov_applies(model.cfg) is None  # HYLA: no W_OV (NaN)
    return {
        "ov2_mlp2_accuracy@authors": ov2_mlp2_accuracy_authors(model, task) if ov else math.nan,
        "qk1_num_to_prev_var@authors": qk1_num_to_prev_var_authors(model, task),
        "qk2_ov1_var_identity@authors": (qk2_ov1_var_identity_authors(model, task) if ov
                                         else math.nan),  # fmt: skip
        "attn_l1_equal_to_operands@authors": _l1_equal_to_operands(task, fw_eval),
        "attn_l1_num_to_prev@authors": prev_token_share(task, batches.eval, fw_eval, first=1),
        "attn_l2_equal_to_values@authors": _l2_equal_to_values(batches.eval, fw_eval),
        "probe_l1_var_from_num@authors": adam_linear_probe(
            Xtr, ytr, Xte, yte, task.K, seed=probe_seed
        ),
    }
