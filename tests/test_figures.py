"""Figures for notebooks and papers: every plot function returns a Figure, writes nothing without
a path, writes valid png / pdf / svg files with one, and importing a module of `empirical`
leaves matplotlib's backend alone (only the CLI selects Agg). Plus the intervals that the
training summary and its figure carry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from empirical.figures import FORMATS, figure_path, save_figure
from empirical.run_config import load_run_config
from empirical.rundir import RunDir
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


@pytest.fixture(scope="module")
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

LIBRARY_MODULES = [
    "empirical",
    "empirical.analysis",
    "empirical.analysis.plots",
    "empirical.analysis.report",
    "empirical.compare_qk",
    "empirical.compare_qk.plots",
    "empirical.compare_qk.report",
    "empirical.train.plots",
    "empirical.train.summary",
    "empirical.sweep.results",
    "empirical.sweep.grid",
    "empirical.model",
    "empirical.stats",
    "empirical.figures",
]


def _python(code: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | env
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_the_library_keeps_the_backend():
    code = (
        "import importlib, matplotlib\n"
        "matplotlib.use('svg')\n"
        f"for name in {LIBRARY_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "from empirical.analysis import analyze_run\n"  # the lazy report import too
        "import matplotlib.pyplot\n"
        "print(matplotlib.get_backend())\n"
    )
    assert _python(code) == "svg"


def test_the_cli_selects_agg_unless_mplbackend_says_otherwise():
    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "from empirical.figures import use_cli_backend\n"
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
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "chance (9.1%)" in labels
    assert len(ax.collections) == len(records[-1]["acc"])  # one interval band per set
    for label in ax.get_xticklabels() + ax.get_yticklabels():
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
    assert all(n >= 200 for n in sizes.values())
    for name, (low, high) in summary["final_acc_ci95"].items():
        assert 0 <= low <= summary["final_acc"][name] <= high <= 1, name
        assert high - low < 0.2, name  # a few hundred sequences: a few points wide
    assert_valid(rd.training_curves, "png")


def test_analysis_figures_in_every_format(run, tmp_path):
    from empirical.analysis.report import analyze_run

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
    from empirical.analysis import make_probe_data, plots
    from empirical.analysis.report import analyze_model
    from empirical.model import load_model

    rd, cfg = run
    monkeypatch.chdir(tmp_path)
    model = load_model(rd.final_model())
    _, raw = analyze_model(model, cfg.task, make_probe_data(cfg.task, 0, n=128, n_second=64))
    figs = [
        plots.plot_attention_examples(raw["examples"]),
        plots.plot_ov_mlp_cosine(raw["cos"], raw["same"]),
        plots.plot_probes_and_circuit(raw["probes"], raw["isolated"], cfg.task.p),
        plots.plot_fourier_neuron(raw["fourier"]["fit"], raw["fourier"]["model_pre"]),
        plots.plot_fourier_spectrum(raw["fourier"]["fit"]),
        plots.plot_qk1_embeddings(raw["qk1"]),
        plots.plot_qk1_positional(raw["pref"]),
        plots.plot_qk2_identity(raw["ident"]),
    ]
    assert all(isinstance(f, Figure) and plt.fignum_exists(f.number) for f in figs)
    assert list(tmp_path.iterdir()) == []
    for fig in figs:  # no label a reader has to squint at
        for ax in fig.axes:
            for label in ax.get_xticklabels() + ax.get_yticklabels():
                assert label.get_fontsize() >= 8, (fig.get_suptitle(), label.get_text())
        plt.close(fig)
    fig = plots.plot_qk1_embeddings(raw["qk1"], tmp_path / "qk1.pdf", "t")
    assert_valid(tmp_path / "qk1.pdf", "pdf") and not plt.fignum_exists(fig.number)


def test_compare_qk_figures_as_pdf(run, tmp_path):
    from empirical.compare_qk import Options, compare_run, write_outputs

    rd, cfg = run
    opts = Options(
        steps=[0, 20, 40], batch_size=128, one_step_at=20, one_step_lrs=(1.0,),
        score_steps=(1.0,), eval_size=100, progress=False,
    )  # fmt: skip
    paths = write_outputs(compare_run(rd.path, opts), tmp_path, fmt="pdf")
    for key in ("cosines", "structure", "assumptions", "one_step", "blocks_png"):
        assert paths[key].suffix == ".pdf", key
        assert_valid(paths[key], "pdf")
    assert not list(tmp_path.glob("*.png"))
    assert not plt.get_fignums()


def test_sweep_and_grid_figures():
    from empirical.sweep.grid import plot_grid
    from empirical.sweep.results import plot_sweep

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
    from empirical.sweep.grid import plot_grid

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
