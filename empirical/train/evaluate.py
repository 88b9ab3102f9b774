"""Accuracy and loss of a model on named evaluation sets."""

from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate_set(model, tokens: torch.Tensor, labels: torch.Tensor, batch_size: int = 4096):
    """(accuracy, mean cross-entropy) of `model` on one set, in batches, via the fast path."""
    correct, loss_sum, n = 0, 0.0, tokens.shape[0]
    for start in range(0, n, batch_size):
        logits = model.forward_fast(tokens[start : start + batch_size]).float()
        target = labels[start : start + batch_size]
        correct += int((logits.argmax(-1) == target).sum())
        loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
    return correct / max(n, 1), loss_sum / max(n, 1)


def evaluate_sets(model, sets: dict, batch_size: int = 4096) -> tuple[dict, dict]:
    """({name: accuracy}, {name: loss}) over every evaluation set (a dict of Batch)."""
    was_training = model.training
    model.eval()
    acc, loss = {}, {}
    for name, batch in sets.items():
        acc[name], loss[name] = evaluate_set(model, batch.tokens, batch.labels, batch_size)
    model.train(was_training)
    return acc, loss
