"""The real model: task generator, hooked 2-layer transformer, training and analysis.

    from empirical import load_run
    model, vocab = load_run("runs/paper/seed0")     # eval mode; step=N: a snapshot; device=
    logits, cache = model.run_with_cache(model.to_tokens("c=1, b=17, a=42, b+19=?"))
    logits[0, -1].argmax()                          # the answer

`import empirical` stays light (no torch): `load_run` and `load_model` are imported on use.
"""

__all__ = ["load_model", "load_run"]


def __getattr__(name):
    if name in ("load_model", "load_run"):
        from empirical.model import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'empirical' has no attribute {name!r}")
