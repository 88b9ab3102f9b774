"""The gradient of the theorem's model, as our transformer, with respect to every piece the
dynamics ladder releases (issue 36, item 1). `model_pieces` reads the model as
`disentangled.pieces.Pieces` (W_Q W_K^T / sqrt(d_head), W_V W_O, token rows in basis order,
position rows by theorem position); `model_piece_gradients` differentiates its own forward
with every merged matrix as the leaf, comparable with `disentangled.pieces.piece_gradients`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from disentangled.pieces import Pieces, per_sequence
from empirical.bridge.theorem_model.config import TheoremModelConfig
from empirical.bridge.theorem_model.layout import Layout
from empirical.bridge.theorem_model.token_population import TokenPopulation
from empirical.model.forward import forward
from empirical.model.transformer import AssignAddTransformer

DEFAULT_CHUNK = 4096
# leaves that are parameters as they are: leaf name -> parameter name
_PLAIN = {"W_E": "embed.W_E", "W_pos": "pos_embed.W_pos", "w_in": "blocks.1.mlp.W_in",
          "w_out": "blocks.1.mlp.W_out", "w_u": "unembed.W_U"}  # fmt: skip


def _basis_vocab(lay: Layout) -> list[int]:
    """Vocabulary id of each token row of the pieces (basis token order n, v, =, +, pad)."""
    b = lay.basis
    return [lay.vocab_id(label) for label in b.labels[: lay.cfg.p + lay.cfg.K + 3]]


def _merged_leaves(model: AssignAddTransformer) -> dict[str, Tensor]:
    """The model's parameters with each factor pair merged (W_Q W_K^T, W_V W_O), detached."""
    w = {n: q.detach() for n, q in model.named_parameters()}
    out = {}
    for block in (0, 1):
        pre = f"blocks.{block}.attn"
        out[f"qk{block + 1}"] = w[f"{pre}.W_Q"][0] @ w[f"{pre}.W_K"][0].T
        out[f"ov{block + 1}"] = w[f"{pre}.W_V"][0] @ w[f"{pre}.W_O"][0]
    return out | {k: w[name] for k, name in _PLAIN.items()}


def _as_pieces(leaves: dict[str, Tensor], lay: Layout, scale: float) -> dict[str, Tensor]:
    """Merged leaves (or their gradients, with scale = 1 / sqrt(d_head)) as pieces: token rows
    in basis order, position rows by theorem position, score matrices M / sqrt(d_head)."""
    return {
        "tok": leaves["W_E"][_basis_vocab(lay)].clone(),
        "pos": leaves["W_pos"][lay.sequence_position].clone(),
        "qk1": leaves["qk1"] / scale,
        "ov1": leaves["ov1"].clone(),
        "qk2": leaves["qk2"] / scale,
        **{k: leaves[k].clone() for k in ("ov2", "w_in", "w_out", "w_u")},
    }


def model_pieces(model: AssignAddTransformer, cfg: TheoremModelConfig) -> Pieces:
    """The model's weights as the simulator's pieces (module docstring), detached copies."""
    return Pieces(**_as_pieces(_merged_leaves(model), Layout(cfg), model.cfg.attn_scale))


def layer1_mask(cfg: TheoremModelConfig) -> Tensor:
    """[L, L] bool: the transformer's causal mask in theorem positions (query, key): key s is
    seen from t when its sequence position is not after t's."""
    seq = torch.tensor(Layout(cfg).sequence_position)
    return seq[None, :] <= seq[:, None]


def _merged_weights(model: AssignAddTransformer, leaves: dict[str, Tensor]) -> dict[str, Tensor]:
    """The model's parameters with each block's factor pairs replaced by a merged leaf
    beside an identity (answer-kernel shapes: a member axis, and a head axis on attention)."""
    weights = {n: q.detach().unsqueeze(0) for n, q in model.named_parameters()}
    eye = torch.eye(model.cfg.d_model, dtype=torch.float64)
    for block in (0, 1):
        pre = f"blocks.{block}.attn"
        weights[f"{pre}.W_Q"] = leaves[f"qk{block + 1}"][None, None]
        weights[f"{pre}.W_K"] = eye[None, None]
        weights[f"{pre}.W_V"] = leaves[f"ov{block + 1}"][None, None]
        weights[f"{pre}.W_O"] = eye[None, None]
    for key, name in _PLAIN.items():
        weights[name] = leaves[key][None]
    return weights


def model_piece_gradients(
    model: AssignAddTransformer,
    cfg: TheoremModelConfig,
    pop: TokenPopulation,
    loss: str = "first_order",
    xi: float | None = None,
    chunk_size: int = DEFAULT_CHUNK,
) -> tuple[float, dict[str, Tensor]]:
    """(E[loss], {piece: dE[loss]/dpiece}) of the model over `pop` by autograd of its own
    forward, in `disentangled.pieces`' coordinates (module docstring). `xi` divides the
    first-order loss (default cfg.xi)."""
    xi = cfg.xi if xi is None else xi
    leaves = _merged_leaves(model)
    leaves = {k: v.clone().requires_grad_(True) for k, v in leaves.items()}
    grads = {k: torch.zeros_like(v) for k, v in leaves.items()}
    total = 0.0
    for tokens, labels, weights in pop.chunks(chunk_size):
        logits = forward(_merged_weights(model, leaves), tokens[None], model.cfg,
                         positions="answer")[0]  # fmt: skip
        value = (per_sequence(logits, labels, loss, xi) * weights).sum()
        for k, g in zip(leaves, torch.autograd.grad(value, list(leaves.values())), strict=True):
            grads[k] += g
        total += float(value.detach())
    # the score matrix is M / sqrt(d_head): its gradient is sqrt(d_head) dL/dM
    return total, _as_pieces(grads, Layout(cfg), 1.0 / model.cfg.attn_scale)


def compare_pieces(a: dict[str, Tensor], b: dict[str, Tensor]) -> dict[str, dict[str, float]]:
    """Per piece: max |a - b|, max |b| and their ratio (0 when b is 0 and a equals it)."""
    out = {}
    for name in b:
        diff, size = float((a[name] - b[name]).abs().max()), float(b[name].abs().max())
        out[name] = {"max_abs_diff": diff, "max_abs": size,
                     "relative": diff / size if size else diff}  # fmt: skip
    return out
