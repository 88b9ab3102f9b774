"""Attention patterns of both layers on example sequences of each kind (paper Figure 4)."""

from __future__ import annotations

import torch

from empirical.analysis.common import light_forward, number_positions, token_labels
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.registry import family_of


def pick_examples(task: TaskConfig, batch: Batch, n_assign: int = 3) -> list[int]:
    """One row per kind (0-, 1-, 2-var, in that order, kinds absent from the batch skipped):
    the first with the number of assignments closest to `n_assign` (3 leaves some pads)."""
    counts = (batch.tokens[:, : task.L - 4] < task.p).sum(1)
    rows = []
    for k in (0, 1, 2):
        idx = torch.nonzero(batch.n_vars == k).reshape(-1)
        if len(idx):
            rows.append(int(idx[(counts[idx] - n_assign).abs().argmin()]))
    return rows


@torch.no_grad()
def attention_examples(model, task: TaskConfig, batch: Batch, rows: list[int] | None = None):
    """Both layers' attention patterns [2, L, L] (query x key) of one example per kind (with
    several heads: their mean, every head's in `pattern_by_head` [2, h, L, L]).

    Returns a list of dicts: kind, tokens (ids), labels ("pos:token"), text, answer,
    prediction, pattern (tensor [2, L, L]), value_positions (, pattern_by_head)."""
    vocab = family_of(task).vocabulary(task)
    rows = pick_examples(task, batch) if rows is None else rows
    sub = batch[torch.tensor(rows, dtype=torch.long)].to(model.device)
    names = ("blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern")
    logits, cache = model.run_with_cache(
        sub.tokens, last_only=True, names_filter=lambda n: n in names
    )  # logits at `=`, [batch, p]
    out = []
    for i in range(len(rows)):
        by_head = torch.stack([cache[n][i] for n in names]).cpu()  # [2, h, L, L]
        pattern = by_head[:, 0] if by_head.shape[1] == 1 else by_head.mean(1)
        out.append(
            {
                "kind": f"{int(sub.n_vars[i])}var",
                "tokens": sub.tokens[i].tolist(),
                "labels": token_labels(vocab, sub.tokens[i].cpu()),
                "text": vocab.decode(sub.tokens[i].cpu()),
                "answer": int(sub.labels[i]),
                "prediction": int(logits[i].argmax()),
                "value_positions": sub.value_positions[i].tolist(),
                "pattern": pattern,
            }
            | ({"pattern_by_head": by_head} if by_head.shape[1] > 1 else {})
        )
    return out


@torch.no_grad()
def attention_summary(model, task: TaskConfig, batch: Batch) -> dict:
    """Mean attention from `=` by kind: layer 1 to the operand positions L-3, L-2 (and to
    those holding a variable), layer 2 to the operands' value positions; and the assigned
    numbers' mean layer-1 attention to the previous token. With several heads: of the
    layer's (heads') mean pattern, and the same per head in `by_head`."""
    fw = light_forward(model, batch.tokens)
    out = _summary(task, batch, fw.pattern1, fw.pattern2)
    if fw.n_heads > 1:
        out["by_head"] = [_summary(task, batch, fw.patterns1[:, h], fw.patterns2[:, h])
                          for h in range(fw.n_heads)]  # fmt: skip
    return out


def _summary(task: TaskConfig, batch: Batch, pattern1, pattern2) -> dict:
    L = task.L
    batch = batch.to(pattern1.device)
    l1_each = pattern1[:, L - 1, L - 3 : L - 1]  # [B, 2]
    l1_ops = l1_each.sum(-1)
    l1_vars = (l1_each * (batch.operand_vars >= 0)).sum(-1)  # on the variable operands only
    vp = batch.value_positions
    l2_vals = pattern2.gather(1, vp)
    l2_mass = torch.where(vp[:, 0] == vp[:, 1], l2_vals[:, 0], l2_vals.sum(-1))
    out = {}
    for k in (0, 1, 2):
        m = batch.n_vars == k
        if bool(m.any()):
            out[f"{k}var"] = {
                "l1_eq_to_operand_positions": l1_ops[m].mean().item(),
                "l1_eq_operand_mass_above_half": (l1_ops[m] > 0.5).double().mean().item(),
                "l1_eq_to_variable_operands": l1_vars[m].mean().item() if k else None,
                "l2_eq_to_value_positions": l2_mass[m].mean().item(),
            }
    rows, pos = number_positions(task, batch.tokens)
    out["l1_num_to_prev_mean"] = pattern1[rows, pos, pos - 1].mean().item()
    return out
