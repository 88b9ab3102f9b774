"""What a checkpoint does: its layer-2 key-query gradient on 1-var data, its attention, and
how far its first layer and embeddings are from the theorem's assumptions. float64 copies of
the weights, the model split at layer 2's input (empirical.model.partial, re-exported) for the
query `=` alone; dL/dW_QK by autograd at a perturbation P = 0 of the key-query matrix
(docs/compare_qk.md, "Observed updates").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from empirical.analysis.ov_mlp import ov2_mlp2_accuracy as analysis_ov2_mlp2
from empirical.bridge.compare_qk.coords import coordinates, ebar_vectors
from empirical.bridge.compare_qk.metrics import cross_cos_max, gram_stats
from empirical.model.partial import Layer1, layer1, layer2, loss_of
from empirical.model.partial import OneHeadWeights as Weights
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import derive_seed

# -- data --------------------------------------------------------------------------------


def one_var_batch(
    task: TaskConfig,
    n: int,
    seed: int = 0,
    order: str = "fixed",
    distribution: str = "unrestricted",
    held_out: Tensor | None = None,
    all_assigned: bool = False,
    stream: str = "compare-qk",
) -> Batch:
    """n 1-var sequences, deterministic in the arguments, on the CPU. order 'fixed': the
    variable is the second operand (L-2, the theorem's); 'mixed': either, equal odds.
    distribution 'unrestricted' (the theorem's: no r1, r2 or held-out pair) or 'train' (the
    run's restrictions and its held-out pairs `held_out`). all_assigned: all K variables
    assigned. stream: names the random stream (another stream, another sample)."""
    if order not in ("fixed", "mixed"):
        raise ValueError(f"order must be 'fixed' or 'mixed', got {order!r}")
    changes: dict = {"frac_1var": 1.0, "mix": "fractions", "two_var_frequency": 1.0}
    if distribution == "unrestricted":
        changes.update(r1=(), r2=(), held_out_fraction=0.0, train_pairs_file="")
        held = torch.zeros((0, 2), dtype=torch.long)
    elif distribution == "train":
        if held_out is None:
            raise ValueError("distribution='train' needs held_out (the run's held-out pairs)")
        held = held_out
    else:
        raise ValueError(f"distribution must be 'unrestricted' or 'train', got {distribution!r}")
    if all_assigned:
        changes.update(min_assignments=task.K, max_assignments=task.K)
    cfg = dataclasses.replace(task, **changes)
    sampler = TrainingSampler(cfg, held)
    gen = torch.Generator().manual_seed(derive_seed(seed, stream, order, distribution))
    parts, have = [], 0
    while have < n:
        batch = sampler.sample(max(2 * (n - have), 64), gen)
        if order == "fixed":
            batch = batch[batch.operand_vars[:, 1] >= 0]
        parts.append(batch)
        have += len(batch)
    return Batch.cat(parts).slice(0, n)


@torch.no_grad()
def oracle_routing_accuracy(w: Weights, resid1: Tensor, batch: Batch) -> float:
    """Accuracy when layer 2's attention of `=` is replaced by the ideal routing (1/2 on each
    operand's value position; 1 when both are the same): the most any key-query update can
    achieve downstream (low: OV^2 + MLP cannot read numbers at assignments yet)."""
    B, L, _ = resid1.shape
    pattern = torch.zeros(B, L, dtype=resid1.dtype)
    vp = batch.value_positions
    rows = torch.arange(B)
    pattern[rows, vp[:, 0]] += 0.5
    pattern[rows, vp[:, 1]] += 0.5
    logits, _ = layer2(w, resid1, pattern=pattern)
    return float((logits.argmax(-1) == batch.labels).double().mean())


@dataclass
class Gradients:
    """Gradients of the mean loss: dL/dW_QK (merged, [d, d]), dL/dW_Q2, dL/dW_K2."""

    G_QK: Tensor
    G_Q: Tensor
    G_K: Tensor
    loss: float

    def factored_change(self, w: Weights) -> Tensor:
        """First-order change of W_Q W_K^T per unit lr under SGD on W_Q, W_K."""
        return -(self.G_Q @ w.W_K2.T + w.W_Q2 @ self.G_K.T)


def _gradients_of(w: Weights, resid1: Tensor, labels: Tensor, kinds: tuple[str, ...]):
    """({kind: Gradients}, (logits, `=`'s layer-2 pattern)): one forward, a backward per kind."""
    WQ = w.W_Q2.clone().requires_grad_(True)
    WK = w.W_K2.clone().requires_grad_(True)
    P = torch.zeros(WQ.shape[0], WQ.shape[0], dtype=WQ.dtype, requires_grad=True)
    logits, pattern = layer2(w, resid1, WQ, WK, P)
    out = {}
    for i, kind in enumerate(kinds):
        loss = loss_of(logits, labels, kind)
        gQ, gK, gP = torch.autograd.grad(loss, (WQ, WK, P), retain_graph=i < len(kinds) - 1)
        out[kind] = Gradients(gP, gQ, gK, float(loss.detach()))
    return out, (logits.detach(), pattern.detach())


def gradients(w: Weights, resid1: Tensor, labels: Tensor, kind: str = "ce") -> Gradients:
    return _gradients_of(w, resid1, labels, (kind,))[0][kind]


def split_gradients(
    w: Weights, resid1: Tensor, labels: Tensor, kinds: tuple[str, ...] = ("ce",)
) -> dict[str, tuple[Gradients, Gradients, Gradients]]:
    """kind -> (whole batch, first half, second half) for each loss kind in `kinds`: the
    halves' gradients (the comparison's noise floor) and their size-weighted mean, the whole
    batch's gradient. One forward per half; the whole batch's (logits, `=`'s layer-2
    pattern) are under "forward"."""
    n = len(labels)
    h = n // 2
    halves = [_gradients_of(w, resid1[sl], labels[sl], kinds) for sl in (slice(0, h), slice(h, n))]
    f1, f2 = h / n, (n - h) / n
    out: dict = {"forward": tuple(torch.cat([halves[0][1][k], halves[1][1][k]]) for k in (0, 1))}
    for kind in kinds:
        g1, g2 = halves[0][0][kind], halves[1][0][kind]
        fields = ("G_QK", "G_Q", "G_K", "loss")
        whole = Gradients(*(f1 * getattr(g1, k) + f2 * getattr(g2, k) for k in fields))
        out[kind] = (whole, g1, g2)
    return out


# -- attention and assumptions -------------------------------------------------------------


@torch.no_grad()
def layer2_attention(pattern2: Tensor, batch: Batch, p: int, K: int) -> dict:
    """Where `=` looks in layer 2 on 1-var sequences, and the theorem's weights: a_operands
    (mean attention per operand position, what W^0 describes), a_values (per value position),
    b = (1 - 2a) / (L - 2) for each (2a + (L-2) b = 1), beta = ln(a / b), and "mass"."""
    B, L = pattern2.shape
    tok = batch.tokens
    rows = torch.arange(B)
    vp = batch.value_positions
    var_first = batch.operand_vars[:, 0] >= 0
    var_op_pos = torch.where(var_first, L - 3, L - 2)
    num_op_pos = torch.where(var_first, L - 2, L - 3)
    var_value = torch.where(var_first, vp[:, 0], vp[:, 1])
    region = torch.zeros_like(pattern2, dtype=torch.bool)
    region[:, : L - 4] = True
    is_num = (tok < p) & region
    is_var = (tok >= p) & (tok < p + K) & region
    is_pad = (tok == p + K + 2) & region
    bound = torch.zeros_like(region)
    bound[rows, var_value] = True

    def m(x):
        return float(x.mean())

    a_op = m((pattern2[:, L - 3] + pattern2[:, L - 2]) / 2)
    a_val = m((pattern2[rows, vp[:, 0]] + pattern2[rows, vp[:, 1]]) / 2)
    out = {
        "a_operands": a_op,
        "a_values": a_val,
        "mass": {
            "number_operand": m(pattern2[rows, num_op_pos]),
            "variable_operand": m(pattern2[rows, var_op_pos]),
            "bound_number": m(pattern2[rows, var_value]),
            "other_assigned_numbers": m((pattern2 * (is_num & ~bound)).sum(-1)),
            "assignment_variables": m((pattern2 * is_var).sum(-1)),
            "pads": m((pattern2 * is_pad).sum(-1)),
            "plus": m(pattern2[:, L - 4]),
            "self": m(pattern2[:, L - 1]),
        },
    }
    for key, a in (("operands", a_op), ("values", a_val)):
        out[f"b_{key}"] = b = (1 - 2 * a) / (L - 2)
        out[f"beta_{key}"] = float(np.log(a / b)) if a > 0 and b > 0 else float("nan")
    return out


@torch.no_grad()
def layer1_measures(l1: Layer1, w: Weights, batch: Batch, p: int, K: int) -> dict:
    """Layer 1 against the theorem's augmented inputs: `=` attends to the operands and
    carries ebar_v; each assigned number attends to its variable and carries ebar_u."""
    tok, A = batch.tokens, l1.pattern1
    B, L = tok.shape
    ebar = w.W_E[p : p + K] @ w.W_OV1
    eq_to_ops = A[:, L - 1, L - 3 : L - 1].sum(-1)
    # assigned numbers (they always follow their variable)
    region = tok[:, : L - 4]
    r, t = torch.nonzero(region < p, as_tuple=True)
    prev = A[r, t, t - 1]
    row = A[r, t].clone()
    row[torch.arange(len(t)), t - 1] = -1.0
    argmax_prev = (prev > row.max(-1).values).double()
    # what layer 1 wrote, at `=` and at the assigned numbers (only there: [B, L, d] is large)
    added_eq = l1.resid1[:, L - 1] - l1.x[:, L - 1]
    added_num = l1.resid1[r, t] - l1.x[r, t]
    ov = batch.operand_vars
    var = torch.where(ov[:, 0] >= 0, ov[:, 0], ov[:, 1])
    q_cos = F.cosine_similarity(added_eq, ebar[var], dim=-1)
    n_cos = F.cosine_similarity(added_num, ebar[tok[r, t - 1] - p], dim=-1)
    # least-squares coefficient of ebar_v in what layer 1 wrote at `=` (theory: 1)
    q_coef = (added_eq * ebar[var]).sum(-1) / (ebar[var] ** 2).sum(-1)
    return {
        "l1_eq_to_operands_mass": float(eq_to_ops.mean()),
        "l1_num_to_prev_mass": float(prev.mean()),
        "l1_num_to_prev_argmax": float(argmax_prev.mean()),
        "query_added_cos_ebar": float(q_cos.mean()),
        "query_ebar_coefficient": float(q_coef.mean()),
        "number_added_cos_ebar": float(n_cos.mean()),
    }


@torch.no_grad()
def embedding_measures(w: Weights, p: int, K: int, L: int) -> dict:
    """How orthogonal the theorem's basis is in the model: |cos| among token and position
    embeddings, among the ebar_v, between the two groups, and the conditioning of the
    labelled key vectors (random vectors in d dims: |cos| ~ 1/sqrt(d))."""
    E_t = torch.cat([w.W_E, w.W_pos[:L]])
    ebar_t = w.W_E[p : p + K] @ w.W_OV1
    E, ebar = E_t.numpy(), ebar_t.numpy()
    d = E.shape[1]
    # torch's SVD (single-threaded with the CLI's default) rather than numpy's, whose BLAS
    # threads stall on a loaded machine
    s = torch.linalg.svdvals(torch.cat([E_t, ebar_t])).numpy()
    V = p + K + 3
    names = [f"n{m}" for m in range(p)] + [f"v{u}" for u in range(K)] + ["+", "=", "pad"]
    names += [f"pos{t}" for t in range(L)]
    unit = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-300)
    C_rest = np.abs(unit @ unit.T)
    np.fill_diagonal(C_rest, 0.0)
    # `+` is always at L-4 and `=` at L-1: only the sums are seen by the model
    for x, y in ((p + K, V + L - 4), (p + K + 1, V + L - 1)):
        C_rest[x, y] = C_rest[y, x] = 0.0
    i, j = np.unravel_index(C_rest.argmax(), C_rest.shape)
    return {
        "embeddings": gram_stats(E),
        "embeddings_max_pair_excluding_cooccurring": [names[i], names[j]],
        "embeddings_max_abs_cos_excluding_cooccurring": float(C_rest.max()),
        "cos_plus_pos_plus": float(unit[p + K] @ unit[V + L - 4]),
        "cos_eq_pos_eq": float(unit[p + K + 1] @ unit[V + L - 1]),
        "numbers": gram_stats(E[:p]),
        "positions": gram_stats(E[-L:]),
        "ebar": gram_stats(ebar),
        "ebar_vs_embeddings_max_abs_cos": cross_cos_max(ebar, E),
        "ebar_vs_own_variable_cos": [
            float(np.dot(ebar[u], E[p + u]) / (np.linalg.norm(ebar[u]) * np.linalg.norm(E[p + u])))
            for u in range(K)
        ],
        "key_vectors_condition_number": float(s[0] / s[-1]) if s[-1] > 0 else float("inf"),
        "numbers_effective_rank_99": effective_rank(E[:p], 0.99),
        "all_embeddings_effective_rank_99": effective_rank(E, 0.99),
        "random_baseline_abs_cos": float(np.sqrt(2 / (np.pi * d))),
        "norms": {
            "numbers_mean": float(np.linalg.norm(E[:p], axis=1).mean()),
            "variables_mean": float(np.linalg.norm(E[p : p + K], axis=1).mean()),
            "positions_mean": float(np.linalg.norm(E[-L:], axis=1).mean()),
            "eq": float(np.linalg.norm(E[p + K + 1])),
            "ebar_mean": float(np.linalg.norm(ebar, axis=1).mean()),
        },
    }


def effective_rank(V: np.ndarray, energy: float = 0.99) -> int:
    """How many singular directions hold `energy` of sum |row|^2 (orthonormal rows: all)."""
    s2 = torch.linalg.svdvals(torch.as_tensor(np.asarray(V, float))).numpy() ** 2
    return int(np.searchsorted(np.cumsum(s2) / s2.sum(), energy - 1e-12) + 1)


def ov2_mlp2_accuracy(model, task: TaskConfig) -> tuple[float, str]:
    """(isolated OV-MLP accuracy over all p^2 pairs, its source): logits = (v + MLP(v)) W_U,
    v = (W_E[x] + W_E[y]) W_OV^2 / 2, by empirical.analysis's progress measure."""
    return float(analysis_ov2_mlp2(model, task)), "empirical.analysis.ov_mlp.ov2_mlp2_accuracy"


__all__ = [
    "Gradients",
    "Layer1",
    "Weights",
    "coordinates",
    "ebar_vectors",
    "embedding_measures",
    "gradients",
    "layer1",
    "layer1_measures",
    "layer2",
    "layer2_attention",
    "loss_of",
    "one_var_batch",
    "oracle_routing_accuracy",
    "split_gradients",
    "ov2_mlp2_accuracy",
]
