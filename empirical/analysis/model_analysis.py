"""The analyses of one model (paper Section 5, and the progress measures at it):
`numbers, raw = analyze_model(model, task, data)`, `numbers` analysis.json's "model" part."""

from __future__ import annotations

import time

from empirical.analysis.analysis_json import to_jsonable
from empirical.analysis.attention import attention_examples, attention_summary
from empirical.analysis.fourier import fourier_analysis
from empirical.analysis.ov_mlp import isolated_ov_mlp, ov_mlp_cosine, same_addition_cosine
from empirical.analysis.probe_data import ProbeData
from empirical.analysis.probes import answer_probes
from empirical.analysis.progress import progress_measures
from empirical.analysis.qk import qk1_embedding_scores, qk1_positional_preference, qk2_ov1_identity
from empirical.task.config import TaskConfig


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def analyze_model(model, task: TaskConfig, data: ProbeData, held_out=None, seed: int = 0):
    """The Section-5 analyses of one model. Returns (numbers, raw): `numbers` is JSON-ready
    (analysis.json's "model" part), `raw` holds what the figures need."""
    model.eval()
    timings = {}

    def timed(name, fn, *args, **kw):
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        timings[name] = time.perf_counter() - t0
        return out

    test, train = data.test, data.train
    zero = test[test.n_vars == 0]
    prefix = zero.tokens[0] if len(zero) else None
    examples = timed("attention_examples", attention_examples, model, task, test)
    attn = timed("attention_summary", attention_summary, model, task, test)
    cos = timed("ov_mlp_cosine", ov_mlp_cosine, model, task, test, seed=seed)
    same = timed("same_addition_cosine", same_addition_cosine, model, task, test, seed=seed)
    iso = timed("isolated_ov_mlp", isolated_ov_mlp, model, task, held_out)
    probes = timed("answer_probes", answer_probes, model, task, train, test)
    four = timed("fourier", fourier_analysis, model, task, prefix)
    qk1 = timed("qk1_embedding_scores", qk1_embedding_scores, model, task)
    pref = timed("qk1_positional_preference", qk1_positional_preference, model, task)
    ident = timed("qk2_ov1_identity", qk2_ov1_identity, model, task)
    measures, spike = timed("progress_measures", progress_measures, model, data,
                            with_second_spike=True)  # fmt: skip
    fit = four["fit"]
    numbers = {
        "attention": {"examples": [_without(e, "tokens") for e in examples], "summary": attn},
        "ov_mlp_cosine": _without(cos, "samples"),
        "same_addition_cosine": _without(same, "samples"),
        "isolated_ov_mlp": _without(iso, "correct"),
        "answer_probes": probes,
        "fourier": {**four["summary"], "per_neuron_r2": fit.r2, "per_neuron_freq": fit.freq},
        "qk1_embeddings": _without(qk1, "scores") | {"scores": qk1["scores"]},
        "qk1_positional_preference": pref,
        "qk2_ov1_identity": ident,
        "progress_measures": measures,
        "second_spike_scores": spike,
        "timings_s": timings,
    }
    raw = {
        "examples": examples, "cos": cos, "same": same, "isolated": iso, "probes": probes,
        "fourier": four, "qk1": qk1, "pref": pref, "ident": ident,
    }  # fmt: skip
    return to_jsonable(numbers), raw
