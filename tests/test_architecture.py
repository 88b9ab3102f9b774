"""The recipes of docs/architecture.md touch only the files they name: a new analysis of one
model is its function and one declaration (`MODEL_ANALYSES`), which analysis.json's numbers,
summary.md's mechanism table and the figures all pick up."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from empirical.analysis import markdown_summary, model_analysis
from empirical.analysis.model_analysis import ModelAnalysis, analyze_model, model_figures
from empirical.analysis.probe_data import make_probe_data
from empirical.analysis.reference import reference_model
from empirical.task.config import task_config

TASK = task_config(p=7, K=3, max_assignments=3, r1=("c",), r2=("b",), eval_size=100)


def _unembedding_norm(subject) -> float:
    """The new analysis: a function of the model (its own module, in a real one)."""
    return float(subject.model.W_U.detach().norm())


def _figure(raw, titles):
    fig, ax = plt.subplots()
    ax.bar([0], [raw["unembedding_norm"]])
    ax.set_title(f"unembedding norm ({titles.tag})")
    return fig


NEW = ModelAnalysis(
    "unembedding_norm",
    _unembedding_norm,
    json=lambda raw: {"unembedding_norm": raw["unembedding_norm"]},
    rows=lambda result: [("unembedding norm", f"{result['model']['unembedding_norm']:.3f}")],
    figures={"unembedding_norm": _figure},
)


def test_a_new_analysis_is_its_function_and_one_declaration(monkeypatch):
    declared = (*model_analysis.MODEL_ANALYSES, NEW)
    monkeypatch.setattr(model_analysis, "MODEL_ANALYSES", declared)
    model = reference_model(TASK)
    numbers, raw = analyze_model(model, TASK, make_probe_data(TASK, seed=0, n=64, n_second=32))
    want = float(model.W_U.detach().norm())
    assert numbers["unembedding_norm"] == pytest.approx(want, abs=1e-5)
    assert "unembedding_norm" in numbers["timings_s"]
    rows = markdown_summary._mechanism_section({"model": numbers, "probe_data": {"n_test": 32}})
    assert f"| unembedding norm | {numbers['unembedding_norm']:.3f} |" in rows
    figures = model_figures(raw, TASK, "step 0")
    fig = figures["unembedding_norm"]()
    assert fig.axes[0].get_title() == "unembedding norm (step 0)"
    plt.close(fig)
