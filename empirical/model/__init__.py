"""The hooked 2-layer transformer of the paper, its config and its checkpoints.

from empirical.model import ModelConfig, AssignAddTransformer, save_model, load_model
cfg = ModelConfig.for_task(p=97, K=5, L=16)
model = AssignAddTransformer(cfg, seed=0)
logits = model(tokens)                       # [batch, pos, p], through the HookPoints
logits = model(tokens, last_only=True)       # [batch, p]: the answer position
logits = model.forward_fast(tokens)          # [batch, p], same numbers and gradients (training)
logits, cache = model.run_with_cache(tokens)  # cache["pattern", 1], ...

Names are imported on first use (`ModelConfig` and the package import without torch).
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "AssignAddCache", "AssignAddTransformer", "CheckpointError", "ModelConfig", "checkpoint_dict",
    "load_checkpoint", "load_model", "model_from_checkpoint", "save_model", "task_sizes",
    "to_hooked_transformer", "with_middle_layers",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.model.checkpoint": [
            "CheckpointError", "checkpoint_dict", "load_checkpoint", "load_model",
            "model_from_checkpoint", "save_model",
        ],
        "empirical.model.config": ["ModelConfig", "task_sizes"],
        "empirical.model.transformer": ["AssignAddCache", "AssignAddTransformer"],
        "empirical.model.export": ["to_hooked_transformer"],
        "empirical.model.tied": ["with_middle_layers"],
    },
)  # fmt: skip
