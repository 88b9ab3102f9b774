"""Figures for notebooks and papers: every plot function returns a Figure, writes nothing without
a path, writes valid png / pdf / svg files with one, and importing any module of `theory`,
`disentangled` or `empirical` leaves matplotlib's backend, torch's thread counts and the
warnings filters alone (only the CLI selects Agg). Plus the intervals that the training
summary and its figure carry."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from empirical.report.figures import FORMATS, figure_path, save_figure
from empirical.runs.config import load_run_config
from empirical.runs.rundir import RunDir
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def assert_valid(path: Path, fmt: str) -> None:
    data = path.read_bytes()
    assert len(data) > 5_000, path
    if fmt == "svg":
        assert b"<svg" in data[:2000] and data.rstrip().endswith(b"</svg>"), path
    else:
        assert data.startswith(MAGIC[fmt]), path
    if fmt == "pdf":
        assert b"%%EOF" in data[-64:], path


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def run(tmp_path_factory):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = load_run_config(
        ROOT / "configs" / "smoke.toml",
        ["task.eval_size=200", "train.steps=40", "train.snapshot_every=20", "train.threads=1"],
    )
    path = tmp_path_factory.mktemp("figures") / "run"
    train_run(cfg, path, progress=False)
    yield RunDir(path), cfg
    torch.set_num_threads(old)


# -- importing selects no backend; the CLI selects Agg ------------------------------------------

PACKAGES = ("theory", "disentangled", "empirical")

# One subprocess imports every module of every package (every .py file: empirical.train is a
# namespace package, which pkgutil.walk_packages would skip; no __main__, no test module)
# under a backend the user chose with MPLBACKEND, and reports what changed. MPLBACKEND is read
# when matplotlib is imported and then removed from the environment, so that a module calling
# use_cli_backend() on import would switch to Agg and be caught too. The other libraries our
# modules import come first: their own import-time changes (sympy adds warnings filters) are
# theirs, not ours. On glibc it also observes the C allocator (tests/malloc_probe.py): no import
# may raise its mmap threshold (empirical.train.allocator is for a command's own process only).
IMPORT_EVERYTHING = """
import importlib, json, os, sys, warnings
import matplotlib, torch
import matplotlib.pyplot
sys.path.insert(0, "tests")
from malloc_probe import GLIBC, large_block_mapped
os.environ.pop("MPLBACKEND")
ours, others = json.loads(sys.stdin.read())
for name in others:
    try:
        importlib.import_module(name)
    except Exception:  # optional (e.g. TransformerLens 3's names under 4), or a name in it
        pass

def state():
    return {
        "backend": matplotlib.get_backend(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "default_dtype": str(torch.get_default_dtype()),
        "warnings_filters": [repr(f) for f in warnings.filters],
        "large_block_mapped": large_block_mapped() if GLIBC else None,
    }

before = state()
for name in ours:
    importlib.import_module(name)
print(json.dumps({"before": before, "after": state()}))
"""


def our_modules() -> list[str]:
    """Every module of every package, by dotted name (no __main__, no test module)."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__main__" or parts[-1].startswith("test_"):
                continue
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def other_libraries() -> list[str]:
    """Every module outside our packages that one of their files imports (at the top or in a
    function), by its full dotted name."""
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module)
    return sorted(n for n in names if n.split(".")[0] not in PACKAGES)


def _python(code: str, stdin: str = "", **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | env
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        env=environ,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_every_module_keeps_the_backend_threads_and_warnings():
    modules = our_modules()
    for name in ("theory.report", "disentangled.plotting", "empirical.analysis.plots"):
        assert name in modules
    for name in (
        "empirical.bridge.compare_qk.plots",
        "empirical.train.plots",
        "empirical.experiments.sweep.grid",
    ):
        assert name in modules
    assert len(modules) > 90 and not any(".test_" in m or "__main__" in m for m in modules)
    stdin = json.dumps([modules, other_libraries()])
    report = json.loads(_python(IMPORT_EVERYTHING, stdin, MPLBACKEND="svg").splitlines()[-1])
    before, after = report["before"], report["after"]
    assert before["backend"] == "svg"
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, f"importing our {len(modules)} modules changed: {changed}"


def test_the_cli_selects_agg_unless_mplbackend_says_otherwise():
    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "from empirical.report.figures import use_cli_backend\n"
        "use_cli_backend()\n"
        "print(matplotlib.get_backend().lower())\n"
    )
    assert _python(code) == "agg"
    assert _python(code, MPLBACKEND="svg") == "svg"


# -- saving -------------------------------------------------------------------------------------


def test_figure_path_and_formats(tmp_path):
    assert FORMATS == ("png", "pdf", "svg")
    assert figure_path(tmp_path / "a.png") == tmp_path / "a.png"
    assert figure_path(tmp_path / "a.svg") == tmp_path / "a.svg"
    assert figure_path(tmp_path / "a") == tmp_path / "a.png"
    assert figure_path(tmp_path / "a.png", "pdf") == tmp_path / "a.pdf"
    assert figure_path(tmp_path / "a", "svg") == tmp_path / "a.svg"
    with pytest.raises(ValueError, match="jpg"):
        figure_path(tmp_path / "a.jpg")
    with pytest.raises(ValueError, match="eps"):
        figure_path(tmp_path / "a", "eps")


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_figure_writes_each_format_and_closes(tmp_path, fmt):
    fig, ax = plt.subplots()
    ax.plot(range(100), [x * x for x in range(100)], label="x^2")
    ax.legend()
    assert plt.fignum_exists(fig.number)
    out = save_figure(fig, tmp_path / "fig", fmt)
    assert out is fig and out.saved_path == tmp_path / f"fig.{fmt}"
    assert not plt.fignum_exists(fig.number)  # closed after saving
    assert_valid(tmp_path / f"fig.{fmt}", fmt)
    assert [p.name for p in tmp_path.iterdir()] == [f"fig.{fmt}"]  # no temp file left


# -- the plot functions -------------------------------------------------------------------------


def test_training_curves_figure(run, tmp_path, monkeypatch):
    from empirical.train.plots import plot_training_curves
    from empirical.train.summary import eval_set_sizes

    rd, cfg = run
    records = rd.read_metrics()
    monkeypatch.chdir(tmp_path)
    fig = plot_training_curves(records, None, sizes=eval_set_sizes(rd.path), chance=1 / 11)
    assert isinstance(fig, Figure) and plt.fignum_exists(fig.number)
    assert list(tmp_path.iterdir()) == []  # no path: nothing written
    panels = fig.axes[:-1]  # one per number of variable operands, then the loss
    assert [ax.get_title(loc="left") for ax in panels][:3] == [
        "0 variables (both operands numbers)",
        "1 variable operand",
        "2 variable operands",
    ]
    labels = [label for ax in panels for label in ax.get_legend_handles_labels()[1]]
    assert "chance (9.1%)" in labels
    assert "1 variable at a position it never held in training [1var/var]" in labels
    # one interval band per set
    assert sum(len(ax.collections) for ax in panels) == len(records[-1]["acc"])
    for label in panels[0].get_xticklabels() + panels[0].get_yticklabels():
        assert label.get_fontsize() >= 8
    plt.close(fig)
    for fmt in FORMATS:
        fig = plot_training_curves(records, None, tmp_path / "curves.png", "t", fmt=fmt)
        assert not plt.fignum_exists(fig.number)
        assert_valid(tmp_path / f"curves.{fmt}", fmt)


def test_summary_carries_intervals_and_the_figure_a_chance_line(run):
    rd, cfg = run
    summary = json.loads(rd.summary.read_text())
    sizes = summary["eval_set_sizes"]
    assert set(sizes) == set(summary["final_acc"]) == set(summary["final_acc_ci95"])
    assert set(summary["set_timeline"]) == set(sizes)  # every set's >= 90% / 99% steps, spikes
    assert all(n >= 200 for n in sizes.values())
    for name, (low, high) in summary["final_acc_ci95"].items():
        assert 0 <= low <= summary["final_acc"][name] <= high <= 1, name
        assert high - low < 0.2, name  # a few hundred sequences: a few points wide
    assert_valid(rd.training_curves, "png")


@pytest.mark.slow  # the whole analysis again, as SVG (PNG: test_analysis_run; PDF: below)
def test_analysis_figures_in_every_format(run, tmp_path):
    from empirical.analysis.run_analysis import analyze_run

    rd, cfg = run
    result = analyze_run(
        rd.path, out_dir=tmp_path / "svg", n_probe=128, dynamics=True, fmt="svg", threads=1
    )
    assert len(result["figures"]) == 10
    for name in result["figures"]:
        assert name.endswith(".svg")
        assert_valid(tmp_path / "svg" / name, "svg")
    summary = (tmp_path / "svg" / "summary.md").read_text()
    assert "95% interval" in summary and "| sequences |" in summary
    assert result["accuracy_at_step_ci95"]["0var/ind"]["n"] == 200
    assert not plt.get_fignums()  # every figure closed


def test_analysis_plot_functions_return_figures_without_saving(run, tmp_path, monkeypatch):
    from empirical.analysis.model_analysis import analyze_model
    from empirical.analysis.plots import mechanism, qk_scores
    from empirical.analysis.probe_data import make_probe_data
    from empirical.model.checkpoint import load_model

    rd, cfg = run
    monkeypatch.chdir(tmp_path)
    model = load_model(rd.final_model())
    _, raw = analyze_model(model, cfg.task, make_probe_data(cfg.task, 0, n=128, n_second=64))
    figs = [
        mechanism.plot_attention_examples(raw["attention_examples"]),
        mechanism.plot_ov_mlp_cosine(raw["ov_mlp_cosine"], raw["same_addition_cosine"]),
        mechanism.plot_probes_and_circuit(raw["answer_probes"], raw["isolated_ov_mlp"], cfg.task.p),
        mechanism.plot_fourier_neuron(raw["fourier"]["fit"], raw["fourier"]["model_pre"]),
        mechanism.plot_fourier_spectrum(raw["fourier"]["fit"]),
        qk_scores.plot_qk1_embeddings(raw["qk1_embedding_scores"]),
        qk_scores.plot_qk1_positional(raw["qk1_positional_preference"]),
        qk_scores.plot_qk2_identity(raw["qk2_ov1_identity"]),
    ]
    assert all(isinstance(f, Figure) and plt.fignum_exists(f.number) for f in figs)
    assert list(tmp_path.iterdir()) == []
    for fig in figs:  # no label a reader has to squint at
        for ax in fig.axes:
            for label in ax.get_xticklabels() + ax.get_yticklabels():
                assert label.get_fontsize() >= 8, (fig.get_suptitle(), label.get_text())
        plt.close(fig)
    fig = qk_scores.plot_qk1_embeddings(raw["qk1_embedding_scores"], tmp_path / "qk1.pdf", "t")
    assert_valid(tmp_path / "qk1.pdf", "pdf") and not plt.fignum_exists(fig.number)


@pytest.mark.slow  # the whole comparison again, as PDF (PNG: test_compare_qk_pipeline)
def test_compare_qk_figures_as_pdf(run, tmp_path):
    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.outputs import report
    from empirical.bridge.compare_qk.run_comparison import compare_run
    from empirical.report.writer import write_report

    rd, cfg = run
    opts = Options(
        steps=[0, 20, 40], batch_size=128, one_step_at=20, one_step_lrs=(1.0,),
        score_steps=(1.0,), eval_size=100, progress=False,
    )  # fmt: skip
    paths = write_report(report(compare_run(rd.path, opts)), tmp_path, fmt="pdf")
    for key in ("cosines", "structure", "assumptions", "one_step", "blocks_step_000020"):
        assert paths[key].suffix == ".pdf", key
        assert_valid(paths[key], "pdf")
    assert not list(tmp_path.glob("*.png"))
    assert not plt.get_fignums()


def test_sweep_and_grid_figures():
    from empirical.experiments.sweep.figure import plot_sweep
    from empirical.experiments.sweep.grid import plot_grid

    members = [{"x": x, "metric": m} for x, m in ((0.5, 0.4), (0.5, 0.5), (1.0, 0.99))]
    sweep = {
        "points": [
            {"x": 0.5, "n": 2, "mean": 0.45, "std": 0.05, "min": 0.4, "max": 0.5, "aux": {}},
            {"x": 1.0, "n": 1, "mean": 0.99, "std": 0.0, "min": 0.99, "max": 0.99, "aux": {}},
        ],
        "members": members,
        "metric": "2var/ind",
        "target": 0.99,
        "threshold": {"threshold": 1.0, "stable_threshold": 1.0},
        "x_label": "pair fraction",
        "title": "test sweep",
    }
    fig = plot_sweep(sweep)
    assert isinstance(fig, Figure) and plt.fignum_exists(fig.number)
    plt.close(fig)
    grid = {
        "name": "g",
        "sets": ["0var/ind", "1var/ind"],
        "variants": [{"variant": "base", "acc": {"0var/ind": {"mean": 0.9}}}],
        "members": [{"step": 40}],
        "seeds": [0],
    }
    fig = plot_grid(grid)
    assert isinstance(fig, Figure)
    plt.close(fig)


def test_sweep_and_grid_figures_save_in_each_format(tmp_path):
    from empirical.experiments.sweep.grid import plot_grid

    grid = {
        "name": "g",
        "sets": ["0var/ind", "1var/ind", "2var/ind"],
        "variants": [
            {"variant": "base", "acc": {"0var/ind": {"mean": 0.9}, "1var/ind": {"mean": 0.4}}},
            {"variant": "wide", "acc": {"2var/ind": {"mean": 0.7}}},
        ],
        "members": [{"step": 40}],
        "seeds": [0, 1],
    }
    for fmt in FORMATS:
        fig = plot_grid(grid, tmp_path / "grid.png", fmt=fmt)
        assert not plt.fignum_exists(fig.number)
        assert_valid(tmp_path / f"grid.{fmt}", fmt)


def test_run_curves_list_only_the_spike_markers_they_draw():
    """plot_runs: a spike marker gets a legend entry only where one is drawn (the graph family
    has no phase detector: its curves carry no marker and no such entry)."""
    from types import SimpleNamespace

    from empirical.train.plots import plot_runs

    records = [{"step": s, "acc": {"graph/n6": a}} for s, a in ((0, 0.1), (500, 0.9), (1000, 1.0))]
    spike = SimpleNamespace(first_spike=SimpleNamespace(jump_end_step=500), second_spike=None)
    labels = []
    for phases in (None, spike):
        fig = plot_runs([("seed 0", records, phases)], ["graph/n6"])
        labels.append([t.get_text() for t in fig.legends[0].get_texts()])
        plt.close(fig)
    assert labels == [["seed 0"], ["seed 0", "first spike (largest jump)"]]
