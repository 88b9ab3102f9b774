"""Analyses with several heads and the other attentions (docs/heads.md): the light forward of a
multi-head model against run_with_cache, the QK analyses' best head against each head's own,
the OV maps summed over heads, HYLA's OV analyses declared not applicable (and said so in
summary.md), and `python -m empirical codes` on a short HYLA run: every file, the probe and
its controls, the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.__main__ import main as empirical_main
from empirical.analysis.common import light_forward
from empirical.analysis.model_analysis import analyze_model, mechanism_rows
from empirical.analysis.probe_data import make_probe_data
from empirical.analysis.qk import qk1_positional_preference, qk2_ov1_identity
from empirical.analysis.run_analysis import analyze_run
from empirical.config.io import ConfigError
from empirical.model.circuits import layer_ov, ov_matrix, qk_matrix
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.task.config import task_config
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
TASK = task_config(p=11, K=3, L=10, max_assignments=3, r1=("c",), r2=("b",), eval_size=60)
OV_ANALYSES = {"ov_mlp_cosine", "isolated_ov_mlp", "fourier", "qk2_ov1_identity"}


def _model(attention: str = "softmax", n_heads: int = 2, seed: int = 0):
    cfg = ModelConfig.for_task(11, 3, 10, d_model=16, d_mlp=24, n_heads=n_heads,
                               attention=attention, dtype="float64")  # fmt: skip
    return AssignAddTransformer(cfg, seed=seed)


@pytest.fixture(scope="module")
def data():
    return make_probe_data(TASK, seed=0, n=48, n_second=16)


@pytest.fixture(scope="session")
def hyla_run(tmp_path_factory):
    cfg = load_run_config(ROOT / "configs" / "smoke.toml", [
        "model.n_heads=2", "model.attention=hyla", "model.d_model=16", "model.d_mlp=32",
        "task.eval_size=60", "train.steps=20", "train.eval_every=10", "train.batch_size=32",
        "train.checkpoint_every=10", "train.snapshot_every=10", "train.threads=1"])  # fmt: skip
    path = tmp_path_factory.mktemp("hyla") / "run"
    train_run(cfg, path, progress=False, figures=False)
    return path


def test_the_light_forward_of_several_heads_is_the_hooked_forward(data):
    model = _model()
    fw = light_forward(model, data.test.tokens)
    logits, cache = model.run_with_cache(data.test.tokens)
    torch.testing.assert_close(fw.patterns1, cache["pattern", 0])
    torch.testing.assert_close(fw.pattern1, cache["pattern", 0].mean(1))  # the layer's: mean
    torch.testing.assert_close(fw.pattern2, cache["pattern", 1][:, :, -1].mean(1))
    torch.testing.assert_close(fw.resid1, cache["resid_post", 0])
    torch.testing.assert_close(fw.logits, logits[:, -1])
    part = fw.rows(3, 9)
    torch.testing.assert_close(part.resid1, cache["resid_post", 0][3:9])


def test_qk_analyses_report_the_best_head_and_every_head():
    model = _model(n_heads=4)
    pref = qk1_positional_preference(model, TASK)
    each = [qk1_positional_preference(model, TASK, h)["fraction"] for h in range(4)]
    assert pref["by_head"]["fraction"] == each and pref["fraction"] == max(each)
    assert pref["head"] == each.index(max(each))
    ident = qk2_ov1_identity(model, TASK)
    assert ident["identity_score"] == max(ident["by_head"]["identity_score"])
    with pytest.raises(ConfigError, match="single attention head per block"):
        qk_matrix(model, 0)
    summed = sum(ov_matrix(model, 1, head=h) for h in range(4))
    torch.testing.assert_close(layer_ov(model, 1), summed)
    one = _model(n_heads=1)
    assert torch.equal(layer_ov(one, 0), ov_matrix(one, 0))  # one head: the same numbers


def test_hyla_s_ov_analyses_are_not_applicable_and_say_why(data):
    model = _model("hyla")
    with pytest.raises(ConfigError, match="not W_V W_O"):
        layer_ov(model, 1)
    numbers, raw = analyze_model(model, TASK, data)
    assert set(numbers["not_applicable"]) == OV_ANALYSES
    assert not OV_ANALYSES & set(raw) and "answer_probes" in raw
    assert "by_head" in numbers["attention"]["summary"]
    rows = dict(mechanism_rows({"model": numbers, "probe_data": {"n_test": 48}}))
    assert "value path is a ReLU network" in rows["fourier: not computed"]
    progress = numbers["progress_measures"]
    assert progress["ov2_mlp2_accuracy"] is None and progress["qk1_num_to_prev_var"] is not None


def test_a_hyla_run_is_analysed_with_its_spike_steps(hyla_run):
    result = analyze_run(hyla_run, dynamics=False, figures=False, n_probe=64,
                         first_spike_steps=(10, 20), second_spike_steps=(10, 20))  # fmt: skip
    assert set(result["model"]["not_applicable"]) == OV_ANALYSES
    first = result["spike_comparisons"]["first_spike"]["states"]["20"]
    assert first["identity_ours"] is None  # no W_OV: not defined (NaN in the json)


def test_codes_writes_the_probe_its_controls_and_the_timeline(hyla_run, capsys):
    status = empirical_main(["codes", str(hyla_run), "--train-size", "200", "--test-size", "40",
                             "--no-figures", "--quiet"])  # fmt: skip
    assert status == 0
    out = hyla_run / "codes"
    result = json.loads((out / "codes.json").read_text())
    assert result["variant"] == "hyla, 2 heads" and result["features"] == 2 * 2 * 16
    form = result["probe"]["form"]
    for key in ("probe", "initial_codes", "shuffled_labels", "majority", "input_layout"):
        assert all(v is None or 0 <= v <= 1 for v in form[key].values()), key
    assert form["input_layout"]["2var/var"] == 1.0  # the form is a function of the input
    assert result["timeline"]["steps"] == [0, 10, 20]
    assert "| curated/novel_orderings * |" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_codes_over_runs_summarises_by_variant(hyla_run, tmp_path):
    args = ["--train-size", "100", "--test-size", "20", "--no-figures", "--quiet",
            "--no-timeline", "--out", str(tmp_path / "all")]  # fmt: skip
    assert empirical_main(["codes", str(hyla_run), str(hyla_run), *args]) == 0
    data = json.loads((tmp_path / "all" / "codes.json").read_text())
    variant = data["variants"]["hyla, 2 heads"]
    assert variant["goal"]["runs"] == 2 and len(data["runs"]) == 2
    probe = variant["sets"]["2var/var"]["probe"]
    assert probe["n"] == 2 and probe["min"] == probe["max"]  # the same run twice
    assert data["association"]["2var/var"] is None  # fewer than 3 runs


def test_codes_refuses_what_it_cannot_read(hyla_run, tmp_path, capsys):
    assert empirical_main(["codes", str(hyla_run), str(hyla_run)]) == 2
    assert "several runs need --out DIR" in capsys.readouterr().err
    assert empirical_main(["codes", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_the_runs_figure_sets_the_probe_beside_the_trivial_rule_per_variant():
    import matplotlib.pyplot as plt

    from empirical.analysis.codes.plots import plot_runs
    from empirical.analysis.codes.probe import HELD_OUT_SETS

    def stats(m):
        return {"median": m, "min": m - 0.1, "max": m, "n": 2}

    sets = {s: {"probe": stats(0.9), "nearest_centroid": stats(0.5), "model": stats(0.6)}
            for s in HELD_OUT_SETS}  # fmt: skip
    summary = {"softmax, 2 heads": {"runs": ["a", "b"], "sets": sets},
               "softmax, 4 heads": {"runs": ["c"], "sets": sets}}  # fmt: skip
    fig = plot_runs(summary, "codes")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["softmax, 2 heads (2 runs: median and range)",
                                                "softmax, 4 heads (1 run)"]  # fmt: skip
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "goal: 95%", "form probe on the codes", "nearest centroid (trivial rule)",
        "the model's own accuracy"]  # fmt: skip
    assert len(shown[0].containers) == 3 * 2  # three bar groups, each with its range
    plt.close(fig)
