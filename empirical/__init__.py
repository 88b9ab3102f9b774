"""The real model: task generator, hooked 2-layer transformer, training and analysis.

    from empirical import load_run, load_metrics, load_summary
    model, vocab = load_run("runs/authors/seed0")     # eval mode; step=N: a snapshot; device=
    logits, cache = model.run_with_cache(model.to_tokens("c=1, b=17, a=42, b+19=?"))
    logits[0, -1].argmax()                            # the answer
    load_metrics("runs/authors/seed0")                # a DataFrame, one row per evaluation

`import empirical` stays light (no torch): each name below is imported from its module on
first use (EXPORTS), so that importing any module of the package (a config, an options class)
does not import the model. The public API, one example each: docs/api.md.
"""

import importlib

__all__ = [
    "load_analysis", "load_metrics", "load_model", "load_run", "load_run_config", "load_summary",
]  # fmt: skip

# name -> the module that defines it
EXPORTS = {
    "load_analysis": "empirical.runs.load",
    "load_metrics": "empirical.runs.load",
    "load_model": "empirical.model.checkpoint",
    "load_run": "empirical.runs.load",
    "load_run_config": "empirical.runs.config",
    "load_summary": "empirical.runs.load",
}


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module 'empirical' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(EXPORTS[name]), name)
    return value  # cached: later lookups skip __getattr__


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
