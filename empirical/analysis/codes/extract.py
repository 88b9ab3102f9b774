"""The codes at `=` and the labels a probe decodes from them (docs/heads.md, "Latent codes").

The **form** of a sequence is which operands are variables: 0 num+num, 1 var+num (the first
operand is a variable), 2 num+var, 3 var+var; it gives the number of variables (0, 1, 2) and,
for a single variable, whether it is the first or the second operand. The **order** of a
2-var sequence with two distinct value positions: 1 if the first operand's number is assigned
before the second's, else 0 (-1: no order, not scored).
"""

from __future__ import annotations

import torch
from torch import Tensor

from empirical.task.batch import Batch

FORMS = ("num+num", "var+num", "num+var", "var+var")
# target -> (number of classes, class names)
TARGETS: dict[str, tuple[int, tuple[str, ...]]] = {
    "form": (4, FORMS),
    "n_vars": (3, ("0-var", "1-var", "2-var")),
    "order": (2, ("second first", "first first")),
}
# the token types of the input layout (the reference probe: the input's own information)
TYPES = ("number", "variable", "plus", "equals", "pad")


@torch.no_grad()
def answer_codes(model, tokens: Tensor, chunk: int = 2048) -> tuple[Tensor, Tensor]:
    """(codes [B, n_layers, n_heads, L]: each layer's heads' attention weights from the last
    position `=` to every key, float64 on the CPU; logits at `=` [B, d_vocab_out])."""
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(model.cfg.n_layers)]
    codes, logits = [], []
    for part in tokens.split(chunk):
        out, cache = model.run_with_cache(part.to(model.device), last_only=True,
                                          names_filter=lambda n: n in names)  # fmt: skip
        codes.append(torch.stack([cache[n][:, :, -1, :] for n in names], 1).double().cpu())
        logits.append(out.cpu())
    return torch.cat(codes), torch.cat(logits)


def features(codes: Tensor) -> Tensor:
    """One feature vector per sequence: every layer's, head's and key's code, [B, F]."""
    return codes.reshape(codes.shape[0], -1)


def targets(batch: Batch) -> dict[str, Tensor]:
    """The labels of `TARGETS` for each sequence of `batch` (on the CPU)."""
    is_var = (batch.operand_vars >= 0).long().cpu()
    vp = batch.value_positions.cpu()
    both = (is_var.sum(1) == 2) & (vp[:, 0] != vp[:, 1])
    order = torch.where(both, (vp[:, 0] < vp[:, 1]).long(), torch.full_like(vp[:, 0], -1))
    return {"form": is_var[:, 0] + 2 * is_var[:, 1], "n_vars": batch.n_vars.long().cpu(),
            "order": order}  # fmt: skip


def layout(batch: Batch, p: int, K: int) -> Tensor:
    """The reference features: the one-hot token type (number, variable, `+`, `=`, pad) at
    every position, [B, 5 L] float64."""
    tok = batch.tokens.cpu()
    kind = torch.where(tok < p, 0, torch.where(tok < p + K, 1, tok - (p + K) + 2))
    return torch.nn.functional.one_hot(kind.clamp(0, 4), 5).reshape(len(tok), -1).double()
