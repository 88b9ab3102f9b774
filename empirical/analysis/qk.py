"""QK circuits on embeddings (paper Section 5.2, Figures 6, 7a, 7b).

Scores are attention logits as the model computes them: x_query @ W_Q W_K^T @ x_key^T /
sqrt(d_head) (`qk_matrix`). `qk1_embedding_scores` (Figure 6, with `figure6_effects`),
`qk1_positional_preference` (Figure 7a) and `qk2_ov1_identity` (Figure 7b, S[u, v] below) are
defined in docs/analysis.md ("Section 5: the mechanism"); the progress measures
`qk1_num_to_prev_var` and `qk2_ov1_var_identity` read them.

Heads: each analysis reads one head (`head`; None: the single head). On a model with several
heads, `by_best_head` runs it on every head and reports the head that shows the effect most
(by the analysis's headline number: "layer 1 has a head that does this"), with every head's
headline number in `by_head`; the OV maps the scores are read through (Figure 7b's ebar) are
the layer's, summed over its heads (`layer_ov`; docs/heads.md).
"""

from __future__ import annotations

import torch

from empirical.analysis.common import strict_argmax_is
from empirical.model.circuits import layer_ov, qk_matrix
from empirical.task.config import TaskConfig
from empirical.task.registry import family_of


def by_best_head(model, analyse, key: str) -> dict:
    """`analyse(head)` of the single head (head=None); with several heads, the result of the
    head whose `key` is largest (ties: the first), with `head` (its index) and `by_head`
    (every head's `key`) added."""
    if model.cfg.n_heads == 1:
        return analyse(None)
    results = [analyse(h) for h in range(model.cfg.n_heads)]
    values = [r[key] for r in results]
    best = max(range(len(values)), key=lambda h: (values[h] == values[h], values[h], -h))
    return results[best] | {"head": best, "by_head": {key: values}}


@torch.no_grad()
def qk1_embedding_scores(model, task: TaskConfig, head: int | None = None) -> dict:
    """Figure 6: the [(V + L), (V + L)] layer-1 score table over token and position
    embeddings, with labels, and where `=` (token and position L-1) looks. Several heads:
    the head whose numbers lean most on the variables (`num_to_var_gap`, `by_best_head`)."""
    if head is None and model.cfg.n_heads > 1:
        return by_best_head(model, lambda h: qk1_embedding_scores(model, task, h),
                            "num_to_var_gap")  # fmt: skip
    vocab = family_of(task).vocabulary(task)
    L = task.L
    E = torch.cat([model.W_E, model.W_pos[:L]])
    T = E @ qk_matrix(model, 0, head=head) @ E.T
    V = vocab.d_vocab
    labels = list(vocab.names) + [f"pos {i}" for i in range(L)]
    # `=` at position L-1 looking at positions (token-independent part of its key)
    eq_to_pos = T[vocab.eq, V:] + T[V + L - 1, V:]
    order = torch.argsort(eq_to_pos, descending=True).tolist()
    operands = {L - 3, L - 2}
    return {
        "scores": T.cpu(),
        "labels": labels,
        "n_tokens": V,
        "p": task.p,
        "K": task.K,
        "eq_position_scores": eq_to_pos.cpu().tolist(),
        "eq_top2_positions": sorted(order[:2]),
        "eq_prefers_operand_positions": set(order[:2]) == operands,
        "num_to_var_mean": T[: task.p, task.p : task.p + task.K].mean().item(),
        "num_to_num_mean": T[: task.p, : task.p].mean().item(),
    } | figure6_effects(T, task)


def _rank_corr(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman rank correlation of two 1-d tensors (no ties expected)."""
    if len(x) < 2:
        return float("nan")
    rx = torch.argsort(torch.argsort(x)).double()
    ry = torch.argsort(torch.argsort(y)).double()
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return (rx @ ry / (rx.norm() * ry.norm()).clamp_min(1e-12)).item()


def figure6_effects(T: torch.Tensor, task: TaskConfig) -> dict:
    """The three effects the paper reads off Figure 6 (numbers -> variables, positions 0..L-5
    -> variables, position x position rising to the right) as numbers from the layer-1 table
    T = [W_E; W_pos] W_QK^1 [W_E; W_pos]^T; each key is defined in docs/analysis.md."""
    p, K, L = task.p, task.K, task.L
    V = p + K + 3
    is_var = torch.zeros(V, dtype=torch.bool, device=T.device)
    is_var[p : p + K] = True

    def gap(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        on_var = rows[:, is_var].mean(-1)
        off = rows[:, ~is_var].mean(-1)
        top_is_var = is_var[rows.argmax(-1)]
        return on_var - off, top_is_var.double()

    num_gap, num_top = gap(T[:p, :V])
    region = L - 4
    pos_gap, pos_top = gap(T[V : V + region, :V])
    PP = T[V:, V:]  # [L, L] query position x key position
    corr = [_rank_corr(torch.arange(t + 1, dtype=torch.double), PP[t, : t + 1].double().cpu())
            for t in range(2, L)]  # fmt: skip
    rises, rises_region = [], []
    for t in range(1, L):
        up = (PP[t, 1 : t + 1] > PP[t, :t]).double().cpu()
        rises.append(up)
        if t <= L - 5:
            rises_region.append(up)
    return {
        "num_to_var_gap": num_gap.mean().item(),
        "num_top_key_is_var": num_top.mean().item(),
        "pos_to_var_gap": pos_gap.mean().item(),
        "pos_top_key_is_var": pos_top.mean().item(),
        "pos_to_var_gap_by_position": pos_gap.cpu().tolist(),
        "pos_pos_rank_corr": sum(corr) / len(corr),
        "pos_pos_rank_corr_region": sum(corr[: L - 6]) / max(len(corr[: L - 6]), 1),
        "pos_pos_rank_corr_by_query": {t: c for t, c in zip(range(2, L), corr, strict=True)},
        "pos_pos_rising_steps": torch.cat(rises).mean().item(),
        "pos_pos_rising_steps_region": torch.cat(rises_region).mean().item(),
    }


@torch.no_grad()
def qk1_positional_preference(model, task: TaskConfig, head: int | None = None) -> dict:
    """Figure 7a: per number n at t (1..L-5), score_t(s) = (W_E[n] + W_pos[t]) W_QK^1 W_pos[s]
    over s < t, s != t-2; `fraction`: share of (n, t), t >= 3, whose strict argmax is t-1
    (the progress measure qk1_num_to_prev_var); `fraction_incl_self` also lets s = t compete.
    Several heads: the head with the largest `fraction` (`by_best_head`)."""
    if head is None and model.cfg.n_heads > 1:
        return by_best_head(model, lambda h: qk1_positional_preference(model, task, h),
                            "fraction")  # fmt: skip
    L, p = task.L, task.p
    QK = qk_matrix(model, 0, head=head)
    ts = torch.arange(1, L - 4)  # number positions 1..L-5
    # scores[n, t, s] = (W_E[n] + W_pos[t]) QK W_pos[s]
    key = QK @ model.W_pos[:L].T  # [d, L]
    tok = model.W_E[:p] @ key  # [p, L]
    pos = model.W_pos[ts] @ key  # [T, L]
    scores = tok[:, None, :] + pos[None, :, :]  # [p, T, L]
    s = torch.arange(L)
    valid = (s[None, :] < ts[:, None]) & (s[None, :] != ts[:, None] - 2)  # [T, L]
    with_self = valid | (s[None, :] == ts[:, None])
    valid, with_self = valid.to(scores.device), with_self.to(scores.device)
    target = (ts - 1).to(scores.device).expand(p, -1)
    hit = strict_argmax_is(scores, target, valid.expand(p, -1, -1))  # [p, T]
    hit_self = strict_argmax_is(scores, target, with_self.expand(p, -1, -1))
    scored = (ts >= 3).to(scores.device)  # t = 1, 2 have one valid s (t-1): trivially right
    mean_scores = scores.mean(0).masked_fill(~valid, float("nan"))
    argmax_mean = scores.mean(0).masked_fill(~valid, float("-inf")).argmax(-1)
    return {
        "fraction": hit[:, scored].double().mean().item(),
        "fraction_incl_self": hit_self.double().mean().item(),
        "fraction_by_position": {
            int(t): hit[:, i].double().mean().item() for i, t in enumerate(ts)
        },
        "positions": ts.tolist(),
        "positions_scored": ts[ts >= 3].tolist(),
        "mean_scores": mean_scores.cpu(),  # [T, L], NaN where not a valid position
        "argmax_of_mean": argmax_mean.cpu().tolist(),
        "note": "score_t(s) = (W_E[n] + W_pos[t]) W_QK^1 W_pos[s] over s in {0..t-1} minus "
        "{t-2}; fraction of (number n, position t in 3..L-5) whose strict argmax is s = t-1. "
        "fraction_incl_self also lets s = t (the number itself) compete, t in 1..L-5",
    }


def qk1_num_to_prev_var(model, task: TaskConfig) -> float:
    """Progress measure: `qk1_positional_preference(...)["fraction"]`."""
    return qk1_positional_preference(model, task)["fraction"]


@torch.no_grad()
def ebar_identity_matrix(model, p: int, K: int, L: int, eq: int, qk_layer: int = 1,
                         query_ov: int = 0, key_ov: int = 0,
                         head: int | None = None) -> torch.Tensor:  # fmt: skip
    """S[u, v] = (W_E[=] + W_pos[L-1] + W_E[var u] W_OV^query_ov) W_QK^qk_layer
    (nbar + W_E[var v] W_OV^key_ov)^T, [K, K] (layers 0-based; Figure 7b's is qk_layer 1,
    both OVs layer 0). For a chain model, the last layer's QK against the ebar that a middle
    layer's OV writes. `head`: qk_layer's head; the OVs are the layers' (`layer_ov`)."""
    var = model.W_E[p : p + K]
    q = model.W_E[eq] + model.W_pos[L - 1] + var @ layer_ov(model, query_ov)
    k = model.W_E[:p].mean(0) + var @ layer_ov(model, key_ov)
    return q @ qk_matrix(model, qk_layer, head=head) @ k.T


@torch.no_grad()
def qk2_ov1_matrix(model, task: TaskConfig, head: int | None = None) -> torch.Tensor:
    """S[u, v] = (W_E[=] + W_pos[L-1] + ebar_u) W_QK^2 (nbar + ebar_v)^T of Figure 7b, [K, K]
    (ebar_v = W_E[var v] W_OV^1, nbar the mean number embedding; `head`: layer 2's)."""
    vocab = family_of(task).vocabulary(task)
    return ebar_identity_matrix(model, task.p, task.K, task.L, vocab.eq, head=head)


def identity_summary(S: torch.Tensor) -> dict:
    """How much of an identity a [K, K] score matrix is: rows with the strict argmax on the
    diagonal (identity_score), the diagonal's margin over the best other entry, and more."""
    K = S.shape[0]
    eye = torch.eye(K, dtype=torch.bool, device=S.device)
    hit = strict_argmax_is(S, torch.arange(K, device=S.device))
    off = S.masked_fill(eye, float("-inf")).max(-1).values if K > 1 else S.diagonal() * 0
    margin = S.diagonal() - off
    spread = S.std().item() if K > 1 else 1.0
    return {
        "identity_score": hit.double().mean().item(),
        "margin_mean": margin.mean().item(),
        "margin_min": margin.min().item(),
        "margin_over_std": margin.mean().item() / max(spread, 1e-12),
        "diag_softmax": torch.softmax(S, -1).diagonal().mean().item(),
        "row_argmax": S.argmax(-1).tolist(),
    }


@torch.no_grad()
def qk2_ov1_identity(model, task: TaskConfig, head: int | None = None) -> dict:
    """Figure 7b's matrix S and how much of an identity it is (`identity_summary`). Several
    heads: layer 2's head with the largest identity score (`by_best_head`; ebar through layer
    1's summed OV)."""
    if head is None and model.cfg.n_heads > 1:
        return by_best_head(model, lambda h: qk2_ov1_identity(model, task, h), "identity_score")
    S = qk2_ov1_matrix(model, task, head)
    return {
        "matrix": S.cpu(),
        "labels": list(task.letters),
        **identity_summary(S),
        "note": "S[u,v] = (W_E[=] + W_pos[L-1] + ebar_u) W_QK^2 (nbar + ebar_v)^T, "
        "ebar_v = W_E[var v] W_OV^1, nbar = mean number embedding",
    }


def qk2_ov1_var_identity(model, task: TaskConfig) -> float:
    """Progress measure: fraction of rows of S whose strict argmax is the diagonal."""
    return qk2_ov1_identity(model, task)["identity_score"]
