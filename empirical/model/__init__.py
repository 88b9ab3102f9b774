"""The hooked 2-layer transformer of the paper, its config and its checkpoints.

from empirical.model import ModelConfig, AssignAddTransformer, save_model, load_model
cfg = ModelConfig.for_task(p=97, K=5, L=16)
model = AssignAddTransformer(cfg, seed=0)
logits = model(tokens)                       # [batch, p], through the HookPoints
logits = model.forward_fast(tokens)          # same logits and gradients, for training
logits, cache = model.run_with_cache(tokens)  # cache["pattern", 1], ...
"""

from empirical.model.checkpoint import (
    CheckpointError,
    checkpoint_dict,
    load_checkpoint,
    load_model,
    model_from_checkpoint,
    save_model,
)
from empirical.model.config import ModelConfig, task_sizes
from empirical.model.transformer import AssignAddCache, AssignAddTransformer

__all__ = [
    "AssignAddCache",
    "AssignAddTransformer",
    "CheckpointError",
    "ModelConfig",
    "checkpoint_dict",
    "load_checkpoint",
    "load_model",
    "model_from_checkpoint",
    "save_model",
    "task_sizes",
]
