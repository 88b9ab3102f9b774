"""The layer-2 OV-MLP circuit (paper Section 5.1, Figure 5, Figure 5a): `ov_mlp_cosine`,
`same_addition_cosine` and the isolated circuit `isolated_ov_mlp` ("exact subnetwork" on all
p^2 operand pairs, v = (W_E[x] + W_E[y]) W_OV^2 / 2, logits (v + MLP(v)) W_U). Definitions and
choices (raw token embeddings, the 1/2, the skip term): docs/analysis.md, "Section 5". With
several heads W_OV^2 is layer 2's summed over its heads (`layer_ov`: what it writes when every
head attends alike; docs/heads.md); HYLA has no W_OV (`empirical.model.circuits.ov_applies`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from empirical.analysis.common import last_position_hooks, mlp_out, sums_mod_p
from empirical.model.circuits import layer_ov
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import ordered_ranks


def _stats(x: Tensor) -> dict:
    x = x.double()
    return {
        "mean": x.mean().item(),
        "std": x.std().item() if len(x) > 1 else 0.0,
        "median": x.median().item(),
        "n": len(x),
    }


def _resid_mid(model, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """(resid_mid, attn_out) of layer 2 at the last position."""
    names = ("blocks.1.hook_resid_mid", "blocks.1.hook_attn_out")
    return last_position_hooks(model, tokens, names)


def operand_ov_sum(model, values: Tensor, positions: Tensor | None = None) -> Tensor:
    """(W_E[x] + W_E[y]) @ W_OV^2 for rows (x, y) of `values` [n, 2]; with `positions`
    [n, 2], the value positions' W_pos rows are added before the OV map."""
    E = model.W_E[values[:, 0]] + model.W_E[values[:, 1]]
    if positions is not None:
        E = E + model.W_pos[positions[:, 0]] + model.W_pos[positions[:, 1]]
    return E @ layer_ov(model, 1)


@torch.no_grad()
def ov_mlp_cosine(model, task: TaskConfig, batch: Batch, seed: int = 0) -> dict:
    """Figure 5: cos(resid_mid at `=`, (W_E[x] + W_E[y]) W_OV^2) for the batch's operand
    values (matched) and for another row's values (shuffled), per kind. Also the same with
    the layer-2 attention output instead of resid_mid, and with positional embeddings."""
    batch = batch.to(model.device)
    mid, attn_out = _resid_mid(model, batch.tokens)
    gen = torch.Generator().manual_seed(seed)  # CPU permutation, moved: same on any device
    perm = torch.randperm(len(batch), generator=gen).to(model.device)
    vals, pos = batch.operand_values, batch.value_positions
    target = operand_ov_sum(model, vals)
    target_pos = operand_ov_sum(model, vals, pos)
    shuffled = operand_ov_sum(model, vals[perm])
    cos = F.cosine_similarity(mid, target, dim=-1)
    cos_sh = F.cosine_similarity(mid, shuffled, dim=-1)
    cos_pos = F.cosine_similarity(mid, target_pos, dim=-1)
    cos_attn = F.cosine_similarity(attn_out, target, dim=-1)
    cos_attn_sh = F.cosine_similarity(attn_out, shuffled, dim=-1)
    out: dict = {"by_kind": {}, "samples": {}}
    for k in (0, 1, 2):
        m = batch.n_vars == k
        if not bool(m.any()):
            continue
        name = f"{k}var"
        out["by_kind"][name] = {
            "matched": _stats(cos[m]),
            "shuffled": _stats(cos_sh[m]),
            "with_positions": _stats(cos_pos[m]),
            "attn_out_matched": _stats(cos_attn[m]),
            "attn_out_shuffled": _stats(cos_attn_sh[m]),
        }
        out["samples"][name] = {"matched": cos[m].cpu(), "shuffled": cos_sh[m].cpu()}
    out["matched_mean"] = cos.mean().item()
    out["shuffled_mean"] = cos_sh.mean().item()
    out["note"] = (
        "cos(blocks.1.hook_resid_mid[:, -1], (W_E[x] + W_E[y]) @ W_OV^2), raw token "
        "embeddings of the operand values; shuffled: the values of a random other sequence"
    )
    return out


def direct_form(task: TaskConfig, batch: Batch) -> Batch:
    """The batch with every variable operand replaced by its value: 0-var sequences of the
    same additions (the assignments stay, as distractors)."""
    tokens = batch.tokens.clone()
    tokens[:, task.L - 3 : task.L - 1] = batch.operand_values
    L = task.L
    return batch.replace(
        tokens=tokens,
        n_vars=torch.zeros_like(batch.n_vars),
        operand_vars=torch.full_like(batch.operand_vars, -1),
        value_positions=torch.tensor([L - 3, L - 2], device=tokens.device).expand(len(batch), 2),
    )


@torch.no_grad()
def same_addition_cosine(model, task: TaskConfig, batch: Batch, seed: int = 0) -> dict:
    """Figure 5a: cos(resid_mid of a variable sequence, resid_mid of its direct form) vs the
    direct form of a random other sequence with a different sum (mismatched)."""
    batch = batch.to(model.device)
    var = batch[batch.n_vars > 0]
    if len(var) == 0:
        raise ValueError("same_addition_cosine needs sequences with variable operands")
    direct = direct_form(task, var)
    mid_var, _ = _resid_mid(model, var.tokens)
    mid_dir, _ = _resid_mid(model, direct.tokens)
    matched = F.cosine_similarity(mid_var, mid_dir, dim=-1)
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(var), generator=gen).to(model.device)
    other = var.labels[perm] != var.labels
    mismatched = F.cosine_similarity(mid_var[other], mid_dir[perm][other], dim=-1)
    out = {
        "matched": _stats(matched),
        "mismatched": _stats(mismatched),
        "by_kind": {},
        "samples": {"matched": matched.cpu(), "mismatched": mismatched.cpu()},
        "note": "variable form vs the same sequence with each variable operand replaced by "
        "its value (matched) / by the values of another sequence with a different sum",
    }
    for k in (1, 2):
        m = var.n_vars == k
        if bool(m.any()):
            out["by_kind"][f"{k}var"] = {"matched": _stats(matched[m])}
    return out


@torch.no_grad()
def ov_mlp_input(model, p: int, attn_weight: float = 0.5) -> Tensor:
    """v[x, y] = attn_weight * (W_E[x] + W_E[y]) @ W_OV^2 for all pairs, [p, p, d_model]."""
    EO = model.W_E[:p] @ layer_ov(model, 1)
    return attn_weight * (EO[:, None, :] + EO[None, :, :])


@torch.no_grad()
def isolated_ov_mlp_logits(model, p: int, residual: bool = True, attn_weight: float = 0.5):
    """Logits [p, p, p] of the isolated circuit: (v + MLP(v)) @ W_U (or MLP(v) @ W_U)."""
    v = ov_mlp_input(model, p, attn_weight)
    h = mlp_out(model, v)
    return ((v + h) if residual else h) @ model.W_U


@torch.no_grad()
def isolated_ov_mlp(model, task: TaskConfig, held_out: Tensor | None = None) -> dict:
    """Accuracy of the isolated OV-MLP circuit on all p^2 ordered operand pairs (with the
    skip term, and MLP only), and on the held-out pairs if given: the ordered pairs the table
    holds out as `task.held_out_form` reads it (unordered rows {x, y}: both orders; ordered
    rows (x, y): exactly those)."""
    p = task.p
    target = sums_mod_p(p, model.device)
    pred = isolated_ov_mlp_logits(model, p).argmax(-1)
    pred_mlp = isolated_ov_mlp_logits(model, p, residual=False).argmax(-1)
    correct = pred == target
    out = {
        "accuracy": correct.double().mean().item(),
        "accuracy_mlp_only": (pred_mlp == target).double().mean().item(),
        "n_pairs": p * p,
        "correct": correct.cpu(),
        "note": "logits = (v + MLP(v)) @ W_U, v = (W_E[x] + W_E[y]) @ W_OV^2 / 2; argmax is "
        "independent of the 1/2 (no biases)",
    }
    if held_out is not None and len(held_out):
        ranks = ordered_ranks(torch.as_tensor(held_out).long().cpu(), p, task.held_out_form)
        flat = correct.reshape(-1)[ranks.to(correct.device)]
        out["accuracy_held_out_pairs"] = flat.double().mean().item()
        out["accuracy_mlp_only_held_out_pairs"] = (
            (pred_mlp == target).reshape(-1)[ranks.to(correct.device)].double().mean().item()
        )
        out["n_held_out_pairs"] = int(len(ranks))
        out["held_out_form"] = task.held_out_form
    return out


def ov2_mlp2_accuracy(model, task: TaskConfig) -> float:
    """Progress measure: the isolated OV-MLP circuit's accuracy over all p^2 pairs."""
    pred = isolated_ov_mlp_logits(model, task.p).argmax(-1)
    return (pred == sums_mod_p(task.p, model.device)).double().mean().item()
