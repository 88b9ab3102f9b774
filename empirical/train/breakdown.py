"""Accuracy of a set split by which variable sits at which operand position, or by how many
variables the sequence assigns.

The var-restricted sets mix several (variable, position) cells, e.g. `d` first and `e` second;
an average hides that some cells generalize and others sit at chance. This splits them.
"""

from __future__ import annotations

import string

import torch


@torch.no_grad()
def correct_answers(model, batch, batch_size: int = 4096) -> torch.Tensor:
    """Boolean [n]: the model's answer (argmax at `=`) equals the label, per sequence."""
    correct = []
    for start in range(0, len(batch), batch_size):
        logits = model.forward_fast(batch.tokens[start : start + batch_size])
        correct.append(logits.argmax(-1) == batch.labels[start : start + batch_size])
    return torch.cat(correct)


def accuracy_by_operand_variable(model, batch, L: int, batch_size: int = 4096) -> dict[str, dict]:
    """{"d@13": {"acc": 0.89, "n": 2511}, ...}: accuracy over the sequences with variable d at
    position 13 (first operand), for every variable and operand position that occurs."""
    ok = correct_answers(model, batch, batch_size)
    out = {}
    for slot, position in ((0, L - 3), (1, L - 2)):
        column = batch.operand_vars[:, slot]
        for v in sorted(set(column[column >= 0].tolist())):
            sel = column == v
            out[f"{string.ascii_lowercase[v]}@{position}"] = {
                "acc": float(ok[sel].float().mean()),
                "n": int(sel.sum()),
            }
    return out


def accuracy_by_assignment_count(
    model, batch, p: int, K: int, distinct_operands: bool = False, batch_size: int = 4096
) -> dict[int, dict]:
    """{2: {"acc": 0.994, "n": 2917}, 3: ...}: accuracy by the number of variables the sequence
    assigns (variable tokens before the `+`). distinct_operands: only 2-var sequences whose
    two operands are different variables (so every further assignment is a distractor)."""
    ok = correct_answers(model, batch, batch_size)
    tokens = batch.tokens
    is_var = (tokens >= p) & (tokens < p + K)
    count = is_var[:, : tokens.shape[1] - 3].sum(1)  # the operands (L-3, L-2) not counted
    keep = torch.ones_like(ok)
    if distinct_operands:
        u, v = batch.operand_vars[:, 0], batch.operand_vars[:, 1]
        keep = (u >= 0) & (v >= 0) & (u != v)
    out = {}
    for c in sorted(set(count[keep].tolist())):
        sel = keep & (count == c)
        out[int(c)] = {"acc": float(ok[sel].float().mean()), "n": int(sel.sum())}
    return out


def restricted_breakdown(model, sets: dict, L: int) -> dict[str, dict]:
    """The split above for every var-restricted and curated set present."""
    names = [n for n in sets if n.endswith(("/var", "/both")) or n == "curated/novel_orderings"]
    was_training = model.training
    model.eval()
    out = {n: accuracy_by_operand_variable(model, sets[n], L) for n in names}
    model.train(was_training)
    return out
