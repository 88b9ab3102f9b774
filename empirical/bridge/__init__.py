"""Theory against the model: the theorem's model written as our transformer
(`theorem_model`), the theory's predicted layer-2 QK update against the observed one
(`compare_qk`), the ladders from the theorem's model to a trained one (`ladder`: measured on
snapshots; `ladder_dynamics`: trained), the race criterion (`race`), and what drives a window
(`attribution`, `interventions`). See docs/compare_qk.md, docs/ladder.md, docs/race.md,
docs/theorem_model.md, docs/attribution.md."""

__all__ = [
    "attribution", "compare_qk", "interventions", "ladder", "ladder_dynamics", "race",
    "theorem_model",
]  # fmt: skip
