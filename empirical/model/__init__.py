"""The hooked 2-layer transformer of the paper, its config and its checkpoints.

from empirical.model import ModelConfig, AssignAddTransformer, save_model, load_model
cfg = ModelConfig.for_task(p=97, K=5, L=16)
model = AssignAddTransformer(cfg, seed=0)
logits = model(tokens)                       # [batch, pos, p], through the HookPoints
logits = model(tokens, last_only=True)       # [batch, p]: the answer position
logits = model.forward_fast(tokens)          # [batch, p], same numbers and gradients (training)
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
    "to_hooked_transformer",
]


def __getattr__(name):  # the export imports TransformerLens 3's HookedTransformer: only on demand
    if name == "to_hooked_transformer":
        from empirical.model.export import to_hooked_transformer

        return to_hooked_transformer
    raise AttributeError(f"module 'empirical.model' has no attribute {name!r}")
