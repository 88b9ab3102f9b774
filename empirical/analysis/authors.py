"""The paper authors' own definitions of the seven progress measures, as named variants
beside ours: `<our name>@authors` (e.g. `ov2_mlp2_accuracy@authors`).

Facts read from their progress_measures.py (GitHub bexoo/assign-and-add, commit 9cfc8b9; our
code is our own). Their names count layers from 0 (`ov1_mlp1_accuracy`, `qk0_num_to_prev_var`,
...); the paper's Appendix B counts from 1, as our names do. Where a definition below differs
from ours (empirical.analysis.progress.MEASURES), the difference is stated:

* `ov2_mlp2_accuracy@authors`: argmax MLP(W_E[x] W_OV^2 + W_E[y] W_OV^2) W_U over all p^2
  ordered pairs. No residual (skip) term, no 1/2 (with no biases the argmax does not depend
  on the scale). Ours adds the skip term v to MLP(v).
* `qk1_num_to_prev_var@authors`: positional embeddings only: score(t, s) =
  W_pos[t] W_QK^1 W_pos[s] for query positions t = 1..L-5 (their `min(12, n_ctx)`
  assignment positions), keys s < t except s = t-2; the fraction of t whose argmax is
  s = t-1. t = 1 and t = 2 have only s = t-1 left, so 2 of the 11 positions always count.
  Ours adds the query number's token embedding (over every number n) and scores t >= 3 only.
* `qk2_ov1_var_identity@authors`: S[u, v] = ebar_u W_QK^2 ebar_v^T, ebar = W_E[var] W_OV^1,
  the fraction of rows u whose argmax is v = u. Ours adds the `=` token and position to the
  query and the mean number embedding to the key.
* `attn_l1_equal_to_operands@authors`: on their measure batch (below), the fraction of
  sequences whose two largest layer-1 attention weights from `=` are on positions L-3 and
  L-2 (0-var sequences included). Ours: sequences with a variable operand only, every
  variable operand position with at least 1/4 of the attention.
* `attn_l1_num_to_prev@authors`: on their batch, the fraction of numbers at positions
  1..L-5 whose layer-1 attention is largest on position t-1. Same as ours; only the batch
  differs.
* `attn_l2_equal_to_values@authors`: on their batch, the fraction of sequences whose two
  largest layer-2 attention weights from `=` are on the two operands' value positions. Ours
  is the same rule on our probe batch (which also has 2-var sequences, `c+c` included).
* `probe_l1_var_from_num@authors`: a linear layer with bias (nn.Linear's initialisation,
  seeded), trained with Adam (lr 1e-2, L2 weight decay 1e-4) for 4 full-batch epochs on
  raw (unstandardised) features, on the residual after layer 1 at every assigned number of
  1024 sequences; accuracy on those of another 256. Ours: logistic regression on
  standardised features, L-BFGS to convergence (<= 50 iterations).

Their measure batch (`generate_eval_batch`, 512 sequences) and probe batches (1024 / 256) are
uniform over (variable, type, n1, n2) with type in {0-var, variable first, variable second}:
one third 0-var, two thirds 1-var with the variable equally often first or second, every
variable at both positions, every number pair: no 2-var sequence, no restriction, no
held-out pair. We draw the same distribution with our sampler
(empirical.analysis.probe_data.authors_batches).

Ties: our code counts an exact tie for the top as a failure (their torch argmax / topk
breaks ties by index); they differ only on exactly equal floats.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from empirical.analysis.common import LightForward, mlp_out, strict_argmax_is
from empirical.analysis.probe_data import AuthorsBatches
from empirical.model.circuits import ov_matrix, qk_matrix
from empirical.task import Batch, TaskConfig
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


# -- weight-only measures -----------------------------------------------------------------


@torch.no_grad()
def ov2_mlp2_accuracy_authors(model, task: TaskConfig) -> float:
    p = task.p
    EO = model.W_E[:p] @ ov_matrix(model, 1)
    v = EO[:, None, :] + EO[None, :, :]
    pred = (mlp_out(model, v) @ model.W_U).argmax(-1)
    target = ((torch.arange(p)[:, None] + torch.arange(p)[None, :]) % p).to(pred.device)
    return (pred == target).double().mean().item()


@torch.no_grad()
def qk1_positional_scores(model, task: TaskConfig) -> Tensor:
    """W_pos[t] W_QK^1 W_pos[s] for t, s in 0..L-5, [L-4, L-4]."""
    P = model.W_pos[: task.L - 4]
    return P @ qk_matrix(model, 0) @ P.T


@torch.no_grad()
def qk1_num_to_prev_var_authors(model, task: TaskConfig) -> float:
    S = qk1_positional_scores(model, task)
    n = S.shape[0]
    t = torch.arange(1, n, device=S.device)
    s = torch.arange(n, device=S.device)
    valid = (s[None, :] < t[:, None]) & (s[None, :] != t[:, None] - 2)
    hit = strict_argmax_is(S[t], t - 1, valid)
    return hit.double().mean().item()


@torch.no_grad()
def qk2_ov1_var_matrix_authors(model, task: TaskConfig) -> Tensor:
    """ebar W_QK^2 ebar^T over the K variables, [K, K] (their Figure 8 / 7b matrix)."""
    p, K = task.p, task.K
    ebar = model.W_E[p : p + K] @ ov_matrix(model, 0)
    return ebar @ qk_matrix(model, 1) @ ebar.T


def qk2_ov1_var_identity_authors(model, task: TaskConfig) -> float:
    S = qk2_ov1_var_matrix_authors(model, task)
    hit = strict_argmax_is(S, torch.arange(S.shape[0], device=S.device))
    return hit.double().mean().item()


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


def _number_rows(task: TaskConfig, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """(row, position) of every number at positions 1..L-5 (each follows its variable)."""
    region = tokens[:, 1 : task.L - 4]
    rows, pos = torch.nonzero(region < task.p, as_tuple=True)
    return rows, pos + 1


def _l1_num_to_prev(task: TaskConfig, batch: Batch, fw: LightForward) -> float:
    rows, pos = _number_rows(task, batch.tokens)
    rows, pos = rows.to(fw.pattern1.device), pos.to(fw.pattern1.device)
    pat = fw.pattern1[rows, pos]
    valid = torch.arange(task.L, device=pat.device)[None, :] <= pos[:, None]
    return strict_argmax_is(pat, pos - 1, valid).double().mean().item()


def _l2_equal_to_values(batch: Batch, fw: LightForward) -> float:
    vp = batch.value_positions.to(fw.pattern2.device)
    return _top2_is(fw.pattern2, vp).double().mean().item()


def _probe_features(task: TaskConfig, batch: Batch, fw: LightForward):
    rows, pos = _number_rows(task, batch.tokens)
    X = fw.resid1_at(rows, pos)
    y = batch.tokens[rows, pos - 1] - task.p
    return X, y.to(X.device)


def adam_linear_probe(
    Xtr: Tensor,
    ytr: Tensor,
    Xte: Tensor,
    yte: Tensor,
    n_classes: int,
    seed: int = 0,
    epochs: int = PROBE_EPOCHS,
    lr: float = PROBE_LR,
    weight_decay: float = PROBE_WD,
) -> float:
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


def authors_measures(
    model,
    task: TaskConfig,
    batches: AuthorsBatches,
    fw_eval: LightForward,
    fw_train: LightForward,
    fw_test: LightForward,
    seed: int = 0,
) -> dict[str, float]:
    """The seven `@authors` measures, given light forward passes over their three batches."""
    Xtr, ytr = _probe_features(task, batches.train, fw_train)
    Xte, yte = _probe_features(task, batches.test, fw_test)
    probe_seed = derive_seed(seed, "analysis", "authors-probe-init")
    return {
        "ov2_mlp2_accuracy@authors": ov2_mlp2_accuracy_authors(model, task),
        "qk1_num_to_prev_var@authors": qk1_num_to_prev_var_authors(model, task),
        "qk2_ov1_var_identity@authors": qk2_ov1_var_identity_authors(model, task),
        "attn_l1_equal_to_operands@authors": _l1_equal_to_operands(task, fw_eval),
        "attn_l1_num_to_prev@authors": _l1_num_to_prev(task, batches.eval, fw_eval),
        "attn_l2_equal_to_values@authors": _l2_equal_to_values(batches.eval, fw_eval),
        "probe_l1_var_from_num@authors": adam_linear_probe(
            Xtr, ytr, Xte, yte, task.K, seed=probe_seed
        ),
    }
