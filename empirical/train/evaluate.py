"""Accuracy and loss of a model on named evaluation sets."""

from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.no_grad()
def _set_totals(model, tokens: torch.Tensor, labels: torch.Tensor, batch_size: int):
    """(correct count, summed cross-entropy) of one set as 0-d tensors on the model's device:
    nothing is read back to the host here."""
    correct = torch.zeros((), dtype=torch.long, device=tokens.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=tokens.device)
    for start in range(0, tokens.shape[0], batch_size):
        logits = model.forward_fast(tokens[start : start + batch_size]).float()
        target = labels[start : start + batch_size]
        correct += (logits.argmax(-1) == target).sum()
        loss_sum += F.cross_entropy(logits, target, reduction="sum").double()
    return correct, loss_sum


def evaluate_set(model, tokens: torch.Tensor, labels: torch.Tensor, batch_size: int = 4096):
    """(accuracy, mean cross-entropy) of `model` on one set, in batches, via the fast path."""
    correct, loss_sum = _set_totals(model, tokens, labels, batch_size)
    n = max(tokens.shape[0], 1)
    return int(correct) / n, float(loss_sum) / n


def evaluate_sets(model, sets: dict, batch_size: int = 4096) -> tuple[dict, dict]:
    """({name: accuracy}, {name: loss}) over every evaluation set (a dict of Batch): the sets
    stay on their device and every count is read back in one transfer at the end."""
    was_training = model.training
    model.eval()
    names = list(sets)
    totals = [_set_totals(model, sets[n].tokens, sets[n].labels, batch_size) for n in names]
    model.train(was_training)
    if not names:
        return {}, {}
    counts = torch.stack([c.double() for c, _ in totals] + [s for _, s in totals]).tolist()
    acc, loss = {}, {}
    for i, name in enumerate(names):
        n = max(len(sets[name]), 1)
        acc[name] = counts[i] / n
        loss[name] = counts[len(names) + i] / n
    return acc, loss
