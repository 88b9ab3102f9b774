"""The real model: task generator, hooked 2-layer transformer, training and analysis.

    from empirical import load_run, load_metrics, load_summary
    model, vocab = load_run("runs/authors/seed0")     # eval mode; step=N: a snapshot; device=
    logits, cache = model.run_with_cache(model.to_tokens("c=1, b=17, a=42, b+19=?"))
    logits[0, -1].argmax()                            # the answer
    load_metrics("runs/authors/seed0")                # a DataFrame, one row per evaluation

`import empirical` stays light (no torch): every name is imported on first use
(disentangled.lazy_exports). The public API, one example each: docs/api.md.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "load_analysis", "load_metrics", "load_model", "load_run", "load_run_config", "load_summary",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.runs.load": ["load_analysis", "load_metrics", "load_run", "load_summary"],
        "empirical.model.checkpoint": ["load_model"],
        "empirical.runs.config": ["load_run_config"],
    },
)
