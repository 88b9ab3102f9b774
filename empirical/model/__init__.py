"""The hooked 2-layer transformer of the paper, its config and its checkpoints.

    from empirical.model.config import ModelConfig
    from empirical.model.transformer import AssignAddTransformer
    from empirical.model.checkpoint import load_model, save_model
    cfg = ModelConfig.for_task(p=97, K=5, L=16)
    model = AssignAddTransformer(cfg, seed=0)
    logits = model(tokens)                       # [batch, pos, p], through the HookPoints
    logits = model(tokens, last_only=True)       # [batch, p]: the answer position
    logits = model.forward_fast(tokens)          # [batch, p], same numbers and gradients
    logits, cache = model.run_with_cache(tokens)  # cache["pattern", 1], ...

`config` (ModelConfig: no torch at import), `transformer` (AssignAddTransformer), `forward`,
`fast`, `partial` (the forward passes), `batched` (several models as one), `checkpoint` (save,
load, check), `export` (to TransformerLens's HookedTransformer), `tl_import` (from the paper
authors' TransformerLens checkpoints), `tied` (deeper models), `circuits`, `labels`, `groups`
(parameter groups), `device`.
"""

__all__ = [
    "batched", "checkpoint", "circuits", "config", "device", "export", "fast", "forward", "groups",
    "labels", "partial", "tied", "tl_import", "transformer",
]  # fmt: skip
