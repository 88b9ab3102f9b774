"""`python -m empirical analyze` on a short real training run: every output file, numbers in
range, --step, the over-training history, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.analysis.probe_data import make_probe_data
from empirical.analysis.progress import ALL_MEASURE_NAMES, MEASURE_NAMES, progress_over_training
from empirical.cli.analyze import main
from empirical.runs.config import load_run_config
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {
    "attention_patterns.png",
    "ov_mlp_cosine.png",
    "probes.png",
    "fourier_neuron.png",
    "fourier_spectrum.png",
    "qk1_embeddings.png",
    "qk1_positional.png",
    "qk2_ov1_identity.png",
    "progress_measures.png",
    "second_spike.png",
}


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def run_dir(tmp_path_factory):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = load_run_config(
        ROOT / "configs" / "smoke.toml",
        ["task.eval_size=200", "train.steps=40", "train.snapshot_every=20", "train.threads=1"],
    )
    path = tmp_path_factory.mktemp("run")
    train_run(cfg, path, progress=False, figures=False)
    yield path
    torch.set_num_threads(old)


def in_unit(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and -1e-9 <= x <= 1 + 1e-9)


def test_analyze_writes_every_output(run_dir, capsys):
    # the numbers; the figures are drawn by the slow test below (most of the command's time)
    assert main([str(run_dir), "--probe-size", "256", "--no-progress", "--no-figures"]) == 0
    out = run_dir / "analysis"
    assert not list(out.glob("*.png"))
    summary = (out / "summary.md").read_text()
    assert capsys.readouterr().out.strip() == summary.strip()
    for name in MEASURE_NAMES:
        assert name in summary
    result = json.loads((out / "analysis.json").read_text())
    assert result["step"] == 40
    m = result["model"]
    assert set(m["progress_measures"]) == set(ALL_MEASURE_NAMES)
    assert all(in_unit(v) for v in m["progress_measures"].values())
    for kind, d in m["ov_mlp_cosine"]["by_kind"].items():
        assert -1 <= d["matched"]["mean"] <= 1 and -1 <= d["shuffled"]["mean"] <= 1, kind
    assert in_unit(m["isolated_ov_mlp"]["accuracy"])
    assert in_unit(m["answer_probes"]["resid_mid"]["test_acc"])
    assert in_unit(m["qk2_ov1_identity"]["identity_score"])
    assert in_unit(m["qk1_positional_preference"]["fraction"])
    assert len(m["fourier"]["per_neuron_r2"]) == 64
    assert all(in_unit(r) for r in m["fourier"]["per_neuron_r2"])
    assert len(m["qk1_embeddings"]["scores"]) == 17 + 16  # d_vocab + L
    dyn = result["training_dynamics"]
    assert dyn["steps"] == [0, 20, 40]
    for name in ALL_MEASURE_NAMES:
        assert len(dyn["measures"][name]) == 3
        assert all(in_unit(v) for v in dyn["measures"][name])
        assert set(dyn["crossings"][name]) == {"threshold", "first", "stable"}
    assert set(dyn["second_spike"]) == {"a", "b", "c"}



@pytest.mark.slow  # ten figures drawn: 10-25 s on 2 cores
def test_analyze_draws_every_figure(run_dir, tmp_path):
    out = tmp_path / "figs"
    args = [str(run_dir), "--out", str(out), "--probe-size", "128", "--quiet", "--no-progress"]
    assert main(args) == 0
    assert FIGURES <= {p.name for p in out.iterdir()}
    for name in FIGURES:
        assert (out / name).stat().st_size > 15_000, name  # a real picture, not an empty canvas

def test_analyze_a_snapshot_without_dynamics(run_dir):
    args = [str(run_dir), "--step", "20", "--no-dynamics", "--no-figures", "--quiet"]
    assert main(args + ["--probe-size", "128"]) == 0
    result = json.loads((run_dir / "analysis" / "step_000020" / "analysis.json").read_text())
    assert result["step"] == 20 and result["training_dynamics"] is None
    assert result["checkpoint"].endswith("step_000020.pt")


def test_analyze_refuses_a_missing_step_and_a_non_run(run_dir, tmp_path, capsys):
    assert main([str(run_dir), "--step", "7", "--quiet"]) == 2
    assert "no snapshot for step 7" in capsys.readouterr().err
    assert main([str(tmp_path), "--quiet"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_progress_over_training_every_other_snapshot_keeps_the_last(run_dir):
    cfg = load_run_config(run_dir / "config.toml")
    data = make_probe_data(cfg.task, 0, n=128, n_second=128)
    history = progress_over_training(run_dir, data, every=2)
    assert history.steps == [0, 40]


@pytest.mark.slow  # a second whole analysis (9 s); test_analyze_writes_every_output stays fast
def test_analyze_compares_the_given_steps(run_dir, tmp_path):
    out = tmp_path / "cmp"
    args = [str(run_dir), "--out", str(out), "--probe-size", "128", "--quiet", "--no-progress"]
    args += ["--first-spike-steps", "0,20", "--second-spike-steps", "20,40"]
    assert main(args) == 0
    for name in ("first_spike_steps.png", "second_spike_steps.png"):
        assert (out / name).stat().st_size > 15_000, name
    result = json.loads((out / "analysis.json").read_text())
    cmp = result["spike_comparisons"]
    assert cmp["steps"] == {"first_spike": [0, 20], "second_spike": [20, 40]}
    first = cmp["first_spike"]
    assert first["steps"] == [0, 20] and set(first["states"]) == {"0", "20"}
    st = first["states"]["20"]
    assert len(st["example_pattern1"]) == 16 and len(st["S_authors"]) == 3
    shares = st["l1_eq_on_variable_operand"] + st["l1_eq_on_number_operand"]
    assert 0 <= shares <= 1 + 1e-6 and in_unit(st["identity_authors"])
    second = cmp["second_spike"]
    assert second["letter"] == "b" and set(second["states"]["40"]["per_variable"]) == {
        "a",
        "b",
        "c",
    }
    oa = second["states"]["40"]["operand_attention"]
    assert set(oa) == {"first", "second"} and "b" in oa["second"]
    for d in oa["first"].values():
        assert in_unit(d["l1_eq_attention"]) and in_unit(d["accuracy"]) and d["n"] > 0
    summary = (out / "summary.md").read_text()
    assert "## First spike, step 0 vs 20" in summary
    assert "## Second spike, step 20 vs 40" in summary


def test_analyze_refuses_compared_steps_it_cannot_show(run_dir, tmp_path, capsys):
    base = [str(run_dir), "--out", str(tmp_path / "x"), "--quiet", "--no-dynamics"]
    assert main(base + ["--first-spike-steps", "7,20"]) == 2
    assert "no snapshot for step 7" in capsys.readouterr().err
    assert main(base + ["--second-spike-steps", "40,20"]) == 2
    assert "must come before" in capsys.readouterr().err
    assert main(base + ["--example", "pad a 1 + a =", "--first-spike-steps", "0,20"]) == 2
    assert "error" in capsys.readouterr().err
