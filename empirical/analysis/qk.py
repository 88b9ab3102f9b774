"""QK circuits on embeddings (paper Section 5.2, Figures 6, 7a, 7b).

Scores are attention logits as the model computes them: x_query @ W_Q W_K^T @ x_key^T /
sqrt(d_head) (`qk_matrix`).

* `qk1_embedding_scores` (Figure 6): layer-1 scores between every pair of embeddings, rows
  (queries) and columns (keys) both [W_E (all d_vocab tokens); W_pos (positions 0..L-1)],
  i.e. the token x token, token x position, position x token and position x position blocks.
  The full score of query token a at position t to key token b at position s is
  T[a, b] + T[a, pos s] + T[pos t, b] + T[pos t, pos s].
* `qk1_positional_preference` (Figure 7a): for a number n at position t (1..L-5: an
  assigned number follows its variable), score_t(s) = (W_E[n] + W_pos[t]) W_QK^1 W_pos[s]^T
  over the positions where its variable could sit: s < t (causal; s = t is the number
  itself), s != t-2 (structurally a pad or a number). The key-token term of a variable key
  is the same for every s, so it is left out. The measure is the fraction of (n, t) with
  t in 3..L-5 (where more than one s is valid) whose strict argmax is s = t-1. The paper's
  wording also keeps s = t; that variant is reported as `fraction_incl_self`.
* `qk2_ov1_identity` (Figure 7b): S[u, v] = q_u W_QK^2 k_v^T with
  q_u = W_E[=] + W_pos[L-1] + ebar_u (the `=` query after layer 1 copied operand variable u)
  and k_v = nbar + ebar_v (an assigned number after layer 1 copied its variable v), where
  ebar_v = W_E[var v] @ W_OV^1 and nbar is the mean number embedding. Positional terms of the
  key and terms that depend on u only are the same along a row and do not move its argmax.
  Identity score: fraction of rows u whose strict argmax is v = u; margin: mean over rows of
  S[u, u] - max_{v != u} S[u, v]; diag_softmax: mean over rows of softmax_v(S[u, :])[u].
"""

from __future__ import annotations

import torch

from empirical.analysis.common import strict_argmax_is
from empirical.model.circuits import ov_matrix, qk_matrix
from empirical.task import TaskConfig, Vocabulary


@torch.no_grad()
def qk1_embedding_scores(model, task: TaskConfig) -> dict:
    """Figure 6: the [(V + L), (V + L)] layer-1 score table over token and position
    embeddings, with labels, and where `=` (token and position L-1) looks."""
    vocab = Vocabulary.from_config(task)
    L = task.L
    E = torch.cat([model.W_E, model.W_pos[:L]])
    T = E @ qk_matrix(model, 0) @ E.T
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
    """The three effects the paper reads off Figure 6, as numbers from the layer-1 table T
    ([W_E; W_pos] W_QK^1 [W_E; W_pos]^T):

    * numbers -> variables (purple outline): per number query n, its mean score on the K
      variable keys minus its mean on every other token key; `num_to_var_gap` averages it,
      `num_top_key_is_var` is the share of numbers whose highest-scoring key token is a
      variable;
    * positions 0..L-5 -> variables (orange outline): the same with the position query
      W_pos[t], t in the assignment region (`pos_to_var_gap`, `pos_top_key_is_var`);
    * position x position rises to the right (red outline): for each query position t, the
      Spearman correlation of W_pos[t] W_QK^1 W_pos[s] with s over the visible keys s <= t
      (`pos_pos_rank_corr`, mean over t = 2..L-1; `..._region` over t = 2..L-5), and the
      share of adjacent key steps s-1 -> s (s <= t) whose score rises
      (`pos_pos_rising_steps`, all t; `..._region` for t <= L-5).
    """
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
def qk1_positional_preference(model, task: TaskConfig) -> dict:
    """Figure 7a and the progress measure qk1_num_to_prev_var (see the module docstring)."""
    L, p = task.L, task.p
    QK = qk_matrix(model, 0)
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
                         query_ov: int = 0, key_ov: int = 0) -> torch.Tensor:  # fmt: skip
    """S[u, v] = (W_E[=] + W_pos[L-1] + W_E[var u] W_OV^query_ov) W_QK^qk_layer
    (nbar + W_E[var v] W_OV^key_ov)^T, [K, K] (layers 0-based; Figure 7b's is qk_layer 1,
    both OVs layer 0). For a chain model, the last layer's QK against the ebar that a middle
    layer's OV writes."""
    var = model.W_E[p : p + K]
    q = model.W_E[eq] + model.W_pos[L - 1] + var @ ov_matrix(model, query_ov)
    k = model.W_E[:p].mean(0) + var @ ov_matrix(model, key_ov)
    return q @ qk_matrix(model, qk_layer) @ k.T


@torch.no_grad()
def qk2_ov1_matrix(model, task: TaskConfig) -> torch.Tensor:
    """S[u, v] of Figure 7b (module docstring), [K, K]."""
    vocab = Vocabulary.from_config(task)
    return ebar_identity_matrix(model, task.p, task.K, task.L, vocab.eq)


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
def qk2_ov1_identity(model, task: TaskConfig) -> dict:
    S = qk2_ov1_matrix(model, task)
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
