"""M copies of the paper's model as one module: stacked weights, one batched fast forward.

`BatchedModel(cfg, seeds)` holds every parameter of `AssignAddTransformer` with a leading
member dimension ([M, *shape]), member m initialised exactly as `AssignAddTransformer(cfg,
seed=seeds[m])`. `forward_fast(tokens)` takes tokens [M, batch, L] (each member its own
batch) and returns logits [M, batch, d_vocab_out]: `AssignAddTransformer.forward_fast` with a
leading member dimension on every tensor (the same reparameterised computation: per-token
tables for layer 1, layer 2 at the answer position only; see docs/model.md), written with
batched matmuls and member-offset gathers rather than `vmap` (whose fallback for
`torch.take` made it slower than a loop over members on the CPU).

Member m's logits depend only on member m's weights and tokens, so the gradient of
`sum_m loss_m` with respect to member m's weights is the gradient of loss_m alone: one
backward trains every member, and an optimiser whose update is elementwise (AdamW) updates
each member exactly as it would update that member alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from empirical.model import AssignAddTransformer, ModelConfig

# parameter names of AssignAddTransformer, in its parameter order
PARAM_NAMES = (
    "embed.W_E",
    "pos_embed.W_pos",
    "blocks.0.attn.W_Q",
    "blocks.0.attn.W_K",
    "blocks.0.attn.W_V",
    "blocks.0.attn.W_O",
    "blocks.1.attn.W_Q",
    "blocks.1.attn.W_K",
    "blocks.1.attn.W_V",
    "blocks.1.attn.W_O",
    "blocks.1.mlp.W_in",
    "blocks.1.mlp.W_out",
    "unembed.W_U",
)


def _key(name: str) -> str:
    return name.replace(".", "__")


class BatchedModel(nn.Module):
    """M members of one architecture. `params()` yields [M, ...] parameters in the order of
    `AssignAddTransformer.parameters()`; `member_state(m)` is member m's `state_dict`."""

    def __init__(self, cfg: ModelConfig, seeds: list[int], device=None):
        super().__init__()
        cfg.require_complete()
        if not seeds:
            raise ValueError("a BatchedModel needs at least one member")
        self.cfg = cfg
        self.n_members = len(seeds)
        models = [AssignAddTransformer(cfg, seed=int(s)) for s in seeds]
        names = [n for n, _ in models[0].named_parameters()]
        if tuple(names) != PARAM_NAMES:
            raise RuntimeError(f"AssignAddTransformer's parameters changed: {names}")
        self.weights = nn.ParameterDict(
            {
                _key(n): nn.Parameter(torch.stack([dict(m.named_parameters())[n] for m in models]))
                for n in PARAM_NAMES
            }
        )
        mask = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)
        if device is not None:
            self.to(device)

    def w(self, name: str) -> Tensor:
        return self.weights[_key(name)]

    def params(self) -> list[nn.Parameter]:
        return [self.w(n) for n in PARAM_NAMES]

    @property
    def device(self) -> torch.device:
        return self.w("embed.W_E").device

    # -- members in and out -------------------------------------------------------------------

    def member_state(self, m: int) -> dict[str, Tensor]:
        """Member m's weights as an AssignAddTransformer state_dict (CPU copies)."""
        return {n: self.w(n)[m].detach().cpu().clone() for n in PARAM_NAMES}

    @torch.no_grad()
    def load_member_state(self, m: int, state: dict[str, Tensor]) -> None:
        for n in PARAM_NAMES:
            self.w(n)[m].copy_(state[n].to(self.device))

    @torch.no_grad()
    def copy_member_into(self, m: int, model: AssignAddTransformer) -> AssignAddTransformer:
        """Write member m's weights into `model` (a single model of the same config)."""
        params = dict(model.named_parameters())
        for n in PARAM_NAMES:
            params[n].copy_(self.w(n)[m])
        return model

    # -- the batched fast forward -------------------------------------------------------------

    def forward_fast(self, tokens: Tensor) -> Tensor:
        """Logits [M, batch, d_vocab_out] for tokens [M, batch, L] (L <= n_ctx)."""
        if tokens.ndim != 3 or tokens.shape[0] != self.n_members:
            raise ValueError(
                f"tokens must have shape [members={self.n_members}, batch, pos], "
                f"got {tuple(tokens.shape)}"
            )
        tokens = tokens.long()
        M, batch, length = tokens.shape
        cfg = self.cfg
        V, scale = cfg.d_vocab, cfg.attn_scale
        w = self.w
        offset = (torch.arange(M, device=tokens.device) * V).view(M, 1, 1)
        gtok = tokens + offset  # row ids into [M * V, ...] views of per-member tables

        def pool(weights: Tensor) -> Tensor:  # [M, B, L] -> [M, B, N]
            z = weights.new_zeros(M, batch, V).scatter_add(2, tokens, weights)
            return torch.cat([z, weights], dim=2)

        def at(r: Tensor) -> Tensor:  # [M, B, N] -> [M, B, L]
            return r[..., :V].gather(2, tokens) + r[..., V:]

        def rows(table: Tensor) -> Tensor:  # [M, V, k] -> per-token rows [M, B, L, k]
            k = table.shape[-1]
            flat = table.reshape(M * V, k).index_select(0, gtok.reshape(-1))
            return flat.view(M, batch, length, k)

        W_E = w("embed.W_E")
        C = torch.cat([W_E, w("pos_embed.W_pos")[:, :length]], dim=1)  # [M, N, d]
        N = C.shape[1]
        WQ0, WK0 = w("blocks.0.attn.W_Q")[:, 0], w("blocks.0.attn.W_K")[:, 0]
        WV0, WO0 = w("blocks.0.attn.W_V")[:, 0], w("blocks.0.attn.W_O")[:, 0]
        WQ1, WK1 = w("blocks.1.attn.W_Q")[:, 0], w("blocks.1.attn.W_K")[:, 0]
        WV1, WO1 = w("blocks.1.attn.W_V")[:, 0], w("blocks.1.attn.W_O")[:, 0]

        T = torch.bmm(torch.bmm(C, WQ0), torch.bmm(C, WK0).transpose(1, 2)) / scale
        T_tt, T_tp, T_pt, T_pp = T[:, :V, :V], T[:, :V, V:], T[:, V:, :V], T[:, V:, V:]
        tt_index = (gtok[:, :, :, None] * V) + tokens[:, :, None, :]
        scores = (
            torch.take(T_tt, tt_index)
            + rows(T_tp)
            + rows(T_pt.transpose(1, 2)).transpose(2, 3)
            + T_pp[:, None]
        )
        scores = scores.masked_fill(~self.causal_mask[:length, :length], float("-inf"))
        A = torch.softmax(scores, dim=-1)  # [M, B, query, key]
        C_OV = torch.bmm(torch.bmm(C, WV0), WO0)  # [M, N, d]
        CC = torch.cat([C, C_OV], dim=1)  # [M, 2N, d]
        d = C.shape[2]
        x_last = W_E.reshape(M * V, d).index_select(0, gtok[:, :, -1].reshape(-1))
        x_last = x_last.view(M, batch, d) + C[:, -1:]
        last = x_last + torch.bmm(pool(A[:, :, -1]), C_OV)  # [M, B, d]

        r = torch.bmm(last, torch.bmm(WQ1, torch.bmm(WK1.transpose(1, 2), CC.transpose(1, 2))))
        scores2 = at(r[..., :N]) + (A * at(r[..., N:]).unsqueeze(2)).sum(-1)
        a2 = torch.softmax(scores2 / scale, dim=-1)  # [M, B, key]
        a2A = (a2.unsqueeze(-1) * A).sum(2)
        mix = torch.cat([pool(a2), pool(a2A)], dim=2)  # [M, B, 2N]
        attn_out = torch.bmm(mix, torch.bmm(torch.bmm(CC, WV1), WO1))
        mid = last + attn_out
        hidden = F.relu(torch.bmm(mid, w("blocks.1.mlp.W_in")))
        post = mid + torch.bmm(hidden, w("blocks.1.mlp.W_out"))
        return torch.bmm(post, w("unembed.W_U"))
