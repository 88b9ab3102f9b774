"""M copies of the paper's model as one module: stacked weights, one batched fast forward.

`BatchedModel(cfg, seeds)` holds every parameter of `AssignAddTransformer` with a leading
member dimension ([M, *shape]), member m initialised exactly as `AssignAddTransformer(cfg,
seed=seeds[m])`. `forward_fast(tokens)` maps tokens [M, batch, L] to logits [M, batch,
d_vocab_out] (empirical.model.forward, positions="answer"). Member m's logits depend only on
its own weights and tokens, so one backward of `sum_m loss_m` trains every member, and an
elementwise optimiser (AdamW) updates each exactly as it would alone.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from empirical.model.config import ModelConfig
from empirical.model.fast import param_names, tied_source, unique_param_names
from empirical.model.forward import forward
from empirical.model.transformer import AssignAddTransformer


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
        # in AssignAddTransformer's parameter order (model.tied_layers: without the tied copies)
        self.names = unique_param_names(cfg.n_layers, cfg.tied_layers)
        names = [n for n, _ in models[0].named_parameters()]
        if tuple(names) != self.names:
            raise RuntimeError(f"AssignAddTransformer's parameters changed: {names}")
        self.weights = nn.ParameterDict(
            {
                _key(n): nn.Parameter(torch.stack([dict(m.named_parameters())[n] for m in models]))
                for n in self.names
            }
        )
        if device is not None:
            self.to(device)

    def w(self, name: str) -> Tensor:
        return self.weights[_key(name)]

    def params(self) -> list[nn.Parameter]:
        return [self.w(n) for n in self.names]

    @property
    def device(self) -> torch.device:
        return self.w("embed.W_E").device

    # -- members in and out -------------------------------------------------------------------

    def member_state(self, m: int) -> dict[str, Tensor]:
        """Member m's weights as an AssignAddTransformer state_dict (CPU copies)."""
        n_layers = self.cfg.n_layers
        return {
            n: self.w(tied_source(n, n_layers))[m].detach().cpu().clone()
            for n in param_names(n_layers)
        }

    @torch.no_grad()
    def load_member_state(self, m: int, state: dict[str, Tensor]) -> None:
        for n in self.names:
            self.w(n)[m].copy_(state[n].to(self.device))

    @torch.no_grad()
    def copy_member_into(self, m: int, model: AssignAddTransformer) -> AssignAddTransformer:
        """Write member m's weights into `model` (a single model of the same config)."""
        params = dict(model.named_parameters())
        for n in self.names:
            params[n].copy_(self.w(n)[m])
        return model

    # -- the batched fast forward -------------------------------------------------------------

    def forward_fast(self, tokens: Tensor) -> Tensor:
        """Logits [M, batch, d_vocab_out] for tokens [M, batch, L] (L <= n_ctx): the one forward
        (empirical.model.forward, positions="answer") on the stacked weights."""
        if tokens.ndim != 3 or tokens.shape[0] != self.n_members:
            raise ValueError(
                f"tokens must have shape [members={self.n_members}, batch, pos], "
                f"got {tuple(tokens.shape)}"
            )
        n_layers = self.cfg.n_layers
        weights = {n: self.w(tied_source(n, n_layers)) for n in param_names(n_layers)}
        return forward(weights, tokens, self.cfg, positions="answer")
