"""Theory against the model: the theorem's model written as our transformer
(`theorem_model`), the theory's predicted layer-2 QK update against the observed one
(`compare_qk`), and the ladders from the theorem's model to a trained one (`ladder`: measured on
snapshots; `ladder_dynamics`: trained). See docs/compare_qk.md, docs/ladder.md,
docs/theorem_model.md."""

__all__ = ["compare_qk", "ladder", "ladder_dynamics", "theorem_model"]
