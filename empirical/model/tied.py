"""Change the number of middle blocks of a model trained with tied middle layers.

    model = AssignAddTransformer(ModelConfig.for_task(59, 12, 16, n_layers=3, tied_layers=True))
    deeper = with_middle_layers(model, 2)     # the same weights, the middle block applied twice
    shallow = with_middle_layers(model, 0)    # layer 1 and the last block only (n_layers = 2)

With `model.tied_layers` the middle blocks share block 1's attention weights, so how many
times that attention is applied is free after training.
"""

from __future__ import annotations

import dataclasses

import torch

from empirical.config.io import ConfigError
from empirical.model.config import N_LAYERS
from empirical.model.transformer import AssignAddTransformer


@torch.no_grad()
def with_middle_layers(model: AssignAddTransformer, count: int) -> AssignAddTransformer:
    """A new model with `model`'s weights and `count` middle blocks (n_layers = count + 2),
    each the shared middle attention of `model` (which must have model.tied_layers and at
    least one middle block). Same device, dtype and train/eval mode as `model`."""
    cfg = model.cfg
    if not cfg.tied_layers or cfg.n_layers < 3:
        raise ConfigError(
            "with_middle_layers needs a model with model.tied_layers = true and a middle "
            f"block (n_layers >= 3); this one has tied_layers = {cfg.tied_layers}, "
            f"n_layers = {cfg.n_layers}"
        )
    low, high = N_LAYERS[0] - 2, N_LAYERS[1] - 2
    if isinstance(count, bool) or not isinstance(count, int) or not low <= count <= high:
        raise ConfigError(f"middle layer count: an integer in {low}..{high}, got {count!r}")
    new = AssignAddTransformer(dataclasses.replace(cfg, n_layers=count + 2), seed=0)
    new = new.to(device=model.device, dtype=model.dtype)
    old_last, new_last = f"blocks.{cfg.n_layers - 1}.", f"blocks.{count + 1}."
    source = dict(model.named_parameters())
    for name, param in new.named_parameters():
        if name.startswith(new_last):
            name = old_last + name[len(new_last) :]
        param.copy_(source[name])
    return new.train(model.training)
