"""Save and load a model with the config that built it, in one `torch.save` file.

A checkpoint is a dict {"format": "assign-and-add-model", "format_version": 1, "model_config":
{ModelConfig fields}, "model_state": {name: CPU tensor}, ...any other keys (the trainer's
optimizer, RNG, step, run config)}. `load_model` reads only model_config and model_state, so a
training checkpoint is a model checkpoint too, and returns the model in eval mode. Files are
read with `torch.load(weights_only=True)`: extra entries must be tensors and plain containers.
"""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path
from typing import Any

import torch

from disentangled.errors import UserError
from empirical.config.io import ConfigError, from_dict, load_failure, to_dict
from empirical.model.config import DTYPE_NAMES, ModelConfig, dtype_name
from empirical.model.fast import depth_of, tied_source
from empirical.model.transformer import AssignAddTransformer
from empirical.report.files import atomic_write_bytes

FORMAT = "assign-and-add-model"
FORMAT_VERSION = 1
RESERVED_KEYS = ("format", "format_version", "model_config", "model_state")


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be used; the message names the path and the problem."""


def checkpoint_dict(model: AssignAddTransformer, extra: dict[str, Any] | None = None) -> dict:
    """The dict `save_model` writes: the model's config (with the dtype its weights have now)
    and its weights on the CPU, plus `extra` entries (which may not use the reserved keys)."""
    name = dtype_name(model.dtype)
    if name is None:
        raise ValueError(
            f"cannot save a model in dtype {model.dtype}; allowed: {list(DTYPE_NAMES)}"
        )
    cfg = dataclasses.replace(model.cfg, dtype=name)
    ckpt = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_config": to_dict(cfg),
        "model_state": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
    }
    for key, value in (extra or {}).items():
        if key in RESERVED_KEYS:
            raise ValueError(f"extra checkpoint entry {key!r} would overwrite a reserved key")
        ckpt[key] = value
    return ckpt


def save_model(
    model: AssignAddTransformer, path: str | os.PathLike, extra: dict[str, Any] | None = None
) -> None:
    """Write weights + ModelConfig (+ `extra` entries) to `path` atomically."""
    buffer = io.BytesIO()
    torch.save(checkpoint_dict(model, extra), buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The checkpoint dict at `path`, checked to hold `model_config` and `model_state`."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path}: file does not exist")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: not a regular file")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many kinds for a bad file
        raise CheckpointError(
            f"checkpoint {path}: cannot be read (corrupt, truncated, or not a torch.save file "
            f"of tensors and plain containers): {load_failure(exc)}"
        ) from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"checkpoint {path}: expected a dict, found {type(ckpt).__name__}")
    for key in ("model_config", "model_state"):
        if key not in ckpt:
            raise CheckpointError(
                f"checkpoint {path}: no {key!r} entry (keys: {sorted(map(str, ckpt))}); "
                "it was not written by empirical.model.save_model"
            )
    version = ckpt.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path}: format_version {version!r}, this code reads {FORMAT_VERSION}"
        )
    return ckpt


def model_from_checkpoint(
    ckpt: dict[str, Any], path: str | os.PathLike = "<checkpoint>", device: Any = None
) -> AssignAddTransformer:
    """Rebuild the model from a checkpoint dict (as returned by `load_checkpoint`), in eval
    mode. A config saved with `d_head` None (older checkpoints) gets d_head = d_model."""
    raw_cfg, state = ckpt["model_config"], ckpt["model_state"]
    if not isinstance(raw_cfg, dict):
        raise CheckpointError(f"checkpoint {path}: model_config is not a table: {raw_cfg!r}")
    try:
        cfg = from_dict(ModelConfig, raw_cfg, prefix="model_config.")
        cfg.require_complete()
    except ConfigError as exc:
        raise CheckpointError(f"checkpoint {path}: bad model_config: {exc}") from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"checkpoint {path}: model_state is not a dict of tensors")
    depth = depth_of(state)
    if depth and depth != cfg.n_layers:
        raise CheckpointError(
            f"checkpoint {path}: its weights are a {depth}-layer model's (blocks 0..{depth - 1}) "
            f"but its model_config has n_layers = {cfg.n_layers}"
        )
    if cfg.tied_layers:
        untied = [
            k
            for k in state
            if tied_source(k, cfg.n_layers) != k
            and not torch.equal(state[k], state.get(tied_source(k, cfg.n_layers), state[k]))
        ]
        if untied:
            raise CheckpointError(
                f"checkpoint {path}: model_config has tied_layers = true but {untied[0]} "
                f"differs from {tied_source(untied[0], cfg.n_layers)}"
            )
    model = AssignAddTransformer(cfg, seed=0)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in state.items()}
    problems = [f"missing {k}" for k in expected if k not in found]
    problems += [f"unexpected {k}" for k in found if k not in expected]
    problems += [
        f"{k} has shape {list(found[k])}, the config needs {list(shape)}"
        for k, shape in expected.items()
        if k in found and found[k] != shape
    ]
    if problems:
        raise CheckpointError(
            f"checkpoint {path}: weights do not match model_config "
            f"({', '.join(problems[:6])}{', ...' if len(problems) > 6 else ''})"
        )
    model.load_state_dict(state)
    model.eval()
    return model.to(device) if device is not None else model


def check_depth(found: int, n_layers: int, path, what: str) -> None:
    """Refuse a model file (`what` `path`) whose model has `found` layers where the run's
    config has model.n_layers = `n_layers`."""
    if found != n_layers:
        raise CheckpointError(
            f"{what} {str(path)!r}: holds a {found}-layer model, but this run's config has "
            f"model.n_layers = {n_layers}"
        )


def load_model(path: str | os.PathLike, device: Any = None) -> AssignAddTransformer:
    """Rebuild the model saved at `path` (by `save_model` or the trainer) from the file alone,
    on `device` (default: the CPU), in the dtype it was saved in, in eval mode (call
    `model.train()` to train it; the model has no dropout, so the numbers are the same)."""
    return model_from_checkpoint(load_checkpoint(path), path, device)
