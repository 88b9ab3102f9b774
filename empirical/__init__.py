"""The real model: task generator, hooked 2-layer transformer, training and analysis.

    from empirical import load_run
    model, vocab = load_run("runs/paper/seed0")     # eval mode; step=N: a snapshot; device=
    logits, cache = model.run_with_cache(model.to_tokens("c=1, b=17, a=42, b+19=?"))
    logits[0, -1].argmax()                          # the answer

`import empirical` stays light (no torch): `load_run` and `load_model` are imported on use.
"""

__all__ = ["load_model", "load_run"]


def __getattr__(name):
    if name == "load_model":
        from empirical.model.checkpoint import load_model

        return load_model
    if name == "load_run":
        from empirical.rundir import load_run

        return load_run
    raise AttributeError(f"module 'empirical' has no attribute {name!r}")
