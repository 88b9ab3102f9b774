"""compare-qk end to end on a tiny trained run (seconds): files, ranges, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.outputs import report
from empirical.bridge.compare_qk.run_comparison import compare_run
from empirical.report.writer import Figure, jsonable, write_report
from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def run_dir(tmp_path_factory):
    cfg = load_run_config(
        ROOT / "configs" / "smoke.toml",
        [
            "task.eval_size=100",
            "train.steps=40",
            "train.lr=0.003",
            "train.threads=1",
            "model.d_model=48",
        ],
    )
    path = tmp_path_factory.mktemp("cq") / "run"
    torch.set_num_threads(1)
    train_run(cfg, path, progress=False, figures=False)
    return path


def _strict(text: str):
    def bad(x):
        raise ValueError(f"non-JSON constant {x}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def pipeline(run_dir):
    opts = Options(
        steps=[0, 20, 40], batch_size=256, one_step_at=20, one_step_lrs=(1.0, 30.0),
        score_steps=(1.0, 8.0), eval_size=100, progress=False, prediction_size=4096,
    )  # fmt: skip
    return compare_run(run_dir, opts)


def test_pipeline_end_to_end(pipeline, run_dir, tmp_path):
    result = pipeline
    # the defaults: G1 of the run's own 1-var training distribution, the exact dual frame
    assert result["frame"] == "dual" and result["prediction"] == "population"
    assert (result["options"]["order"], result["options"]["distribution"]) == ("mixed", "train")
    assert [r["step"] for r in result["steps"]] == [0, 20, 40]
    assert [r["next_step"] for r in result["steps"]] == [20, 40, None]
    for r in result["steps"]:
        assert r["frame_exact"]  # 36 labelled key vectors in 48 dimensions
        assert 0 < r["a"] < 0.5 and 0 < r["b"] < 1
        assert r["b"] == pytest.approx((1 - 2 * r["a"]) / 14)
        assert set(r["comparison"]) == {"dual", "score", "orth", "raw"}
        for frame, comp in r["comparison"].items():
            want = {"grad_ce", "grad_lin", "sgd_factored", "weights_identity"}
            if r["next_step"] is not None:
                want |= {"diff", "diff_nodecay", "diff_perp"}
            assert set(comp) == want
            for name, v in comp.items():
                if name == "weights_identity":
                    continue
                for c in v["cos"].values():
                    assert -1 - 1e-9 <= c <= 1 + 1e-9
                assert 0 <= v["identity"]["row_argmax_on_diag"] <= 1
                assert 0 <= v["attenuation"]["fraction"] <= 1
                assert 0 < v["null95_signs"]["all"] < 1 and 0 < v["null95_signs"]["barv_barv"] < 1
                assert ("null95_gram" in v) == (frame == "score")
        assert r["pred_recoverable"] == pytest.approx(1.0)  # 36 key labels in 48 dimensions
        for key in ("split_half_cos_grad_ce", "split_half_cos_grad_lin"):
            assert -1 <= r[key]["all"] <= 1
        if r["next_step"] is not None:
            # lr 0.003 (constant), the smoke config's weight decay 1.0, 20 steps per interval
            assert r["decay"]["factor_per_factor"] == pytest.approx((1 - 0.003 * 1.0) ** 20)
            sc = r["score_change"]
            assert sum(sc["share"]["all"].values()) == pytest.approx(1.0)
            assert sc["norm"]["all"]["total"] > 0
        a = r["assumptions"]
        for key in ("l1_eq_to_operands_mass", "l1_num_to_prev_mass", "ov2_mlp2_accuracy"):
            assert 0 <= a[key] <= 1
        assert 0 <= a["embeddings"]["ebar"]["max_abs_cos"] <= 1
    # the snapshot change is the change of the merged matrix between the two snapshots
    from empirical.bridge.compare_qk.coords import coordinates, theorem_w
    from empirical.bridge.compare_qk.metrics import cosine
    from empirical.model.checkpoint import load_model

    m0, m20 = (load_model(run_dir / "snapshots" / f"step_{s:06d}.pt") for s in (0, 20))
    c = coordinates(m0, 11, 3, 16)
    blocks = dict(result["_blocks"]["raw/diff"])
    np.testing.assert_allclose(blocks[0], c.project(theorem_w(m20) - theorem_w(m0)), atol=1e-10)
    # ... and its W_QK part of the score change; the dual frame reads the update back through
    # the vectors (the round trip of the real snapshot's vectors is exact: cos 1.000)
    assert result["steps"][0]["score_change"]["norm"]["all"]["w_qk"] == pytest.approx(
        np.linalg.norm(blocks[0])
    )
    dual = dict(result["_blocks"]["dual/diff"])[0]
    G = dual.copy()
    back = c.dual().project(c.gradient_of(G))
    assert cosine(back, G) == pytest.approx(1.0, abs=1e-9)
    # the one-step test: its "before" is the trainer's own evaluation of every set
    one = result["one_step"]
    assert one["step"] == 20 and one["rule"] == "--one-step-at"
    acc20 = next(r for r in read_metrics(run_dir / "metrics.jsonl") if r["step"] == 20)["acc"]
    assert set(one["set_sizes"]) == set(acc20) and set(one["set_sizes"].values()) == {100}
    for name in acc20:
        assert one["before"][name] == pytest.approx(acc20[name], abs=1.5 / 100)
    fams = one["families"]
    assert set(fams) == {"sgd", "grad_merged", "predicted_grad", "predicted_orth",
                         "predicted_raw", "random_orth"}  # fmt: skip
    assert one["prediction_distribution"] == "train" and one["frame"] == "dual"
    for fam, rows in fams.items():
        for row in rows + [one["before"]]:
            for name, iv in row["intervals"].items():
                assert iv["n"] == 100 and iv["acc"] == row[name] == iv["correct"] / 100
                assert iv["ci95"][0] <= iv["acc"] <= iv["ci95"][1]  # Wilson, empirical.report.stats
                assert iv["ci95"][1] - iv["ci95"][0] > 0.01
            if fam != "sgd" and row is not one["before"]:
                assert row["rms_dscore"] == pytest.approx(row["t"], rel=1e-4)
    # the prediction's lift moves the block along the prediction (exact frame: 48 dims)
    small = [r for r in fams["predicted_orth"] if r["t"] == 1.0][0]
    assert small["max_abs_dS_orth"] > 0
    for r in fams["predicted_orth"]:
        assert r["cos_dS_orth_G1"] == pytest.approx(1.0, abs=1e-6)
    for r in fams["predicted_grad"]:  # a gradient step along G1: G1 in the dual frame
        assert r["cos_dS_G1"] == pytest.approx(1.0, abs=1e-6)
    for r in fams["random_orth"]:
        assert abs(r["cos_dS_orth_G1"]) < 0.5
    # the windows: from the run's phases (a 40-step run: one window at least), each holding
    # the snapshots inside it
    assert result["windows_source"] == "phases" and result["windows"]
    for e in result["windows"].values():
        assert all(e["lo"] <= s <= e["hi"] for s in e["snapshots"])
    # the theorem's decomposition at every snapshot. G1 of the theorem's population has no
    # residual (test_theorems_g1_is_exactly_its_terms); of the run's training distribution a
    # small one: r1, r2 give the restricted variables' bar_v rows their own operand columns
    for r in result["steps"]:
        assert 0 < r["terms"]["pred"]["share"]["residual"] < 0.1
        assert 0 <= r["terms"]["weights"]["aw_share_vs_memory"] <= 1
    paths = write_report(report(result), tmp_path / "out", figures=False)  # figures: the next tests
    data = _strict(paths["compare_qk.json"].read_text())
    assert data["one_step"]["step"] == 20 and len(data["steps"]) == 3
    assert not list((tmp_path / "out").glob("*.png"))
    npz = np.load(paths["blocks.npz"])
    assert npz["orth__grad_ce"].shape == (3, 2 + 3, 11 + 3 + 3 + 16 + 3)
    assert npz["dual__diff_nodecay"].shape == npz["pred_dual"].shape == (3, 5, 36)
    assert np.isnan(npz["raw__diff"][-1]).all() and np.isfinite(npz["raw__diff"][0]).all()
    summary = paths["summary.md"].read_text()
    assert "| 20 |" in summary and "## Training windows" in summary
    assert "## One step from step 20" in summary and "[Wilson 95% interval]" in summary
    assert "dual frame" in summary and "sign null" in summary and "W_QK part" in summary



FIGURES = ("cosines", "cosines_raw", "cosines_orth", "cosines_score", "terms", "structure",
           "assumptions", "blocks_step_000020", "one_step")  # fmt: skip


def test_every_figure_is_made(pipeline):
    """Each figure the comparison's report declares made from its result, not saved (saving
    them all takes most of compare-qk's time on a toy run: the next, slow test writes them)."""
    import matplotlib.pyplot as plt

    declared = {k: f for k, f in report(pipeline).files.items() if isinstance(f, Figure)}
    assert sorted(declared) == sorted(FIGURES)
    for name, figure in declared.items():
        fig = figure.draw()
        assert fig.axes and fig.axes[0].has_data(), name
        plt.close(fig)


@pytest.mark.slow  # drawing nine figures: about 10 s quiet, 30 s on a busy 2-core machine
def test_every_figure_is_written(pipeline, tmp_path):
    paths = write_report(report(pipeline), tmp_path / "out")
    for key in FIGURES:
        assert paths[key] == tmp_path / "out" / f"{key}.png"
        assert paths[key].stat().st_size > 10_000, key


def test_cli(run_dir, tmp_path, capsys):
    from empirical.__main__ import main

    out = tmp_path / "cli"
    code = main(["compare-qk", str(run_dir), "--steps", "20,40", "--batch-size", "128",
                 "--no-one-step", "--no-figures", "--quiet", "--out", str(out),
                 "--prediction-size", "2048"])  # fmt: skip
    assert code == 0
    data = _strict((out / "compare_qk.json").read_text())
    assert [r["step"] for r in data["steps"]] == [20, 40]
    assert "one_step" not in data
    # the comparison as it was before issue 20: orth frame, fixed order, unrestricted, closed
    legacy = tmp_path / "legacy"
    code = main(["compare-qk", str(run_dir), "--steps", "20,40", "--batch-size", "128",
                 "--no-one-step", "--no-figures", "--quiet", "--out", str(legacy),
                 "--frame", "orth", "--order", "fixed",
                 "--distribution", "unrestricted"])  # fmt: skip
    assert code == 0
    old = _strict((legacy / "compare_qk.json").read_text())
    assert old["frame"] == "orth" and old["prediction"] == "closed"
    assert "orth frame" in (legacy / "summary.md").read_text()
    capsys.readouterr()
    assert main(["compare-qk", str(run_dir), "--prediction", "closed", "--quiet",
                 "--no-one-step", "--out", str(tmp_path / "c")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--distribution unrestricted" in err[0], err
    assert main(["compare-qk", str(tmp_path / "missing")]) == 2
    assert main(["compare-qk", str(run_dir), "--steps", "41", "--quiet"]) == 2
    assert "no snapshot at steps [41]" in capsys.readouterr().err
    # windows by step ranges: given ones replace the phases' (boundary snapshots in both)
    out2 = tmp_path / "cli2"
    code = main(["compare-qk", str(run_dir), "--steps", "0,20,40", "--batch-size", "64",
                 "--no-one-step", "--no-figures", "--quiet", "--out", str(out2),
                 "--windows", "early=0:20,late=20:40", "--prediction-size", "2048"])  # fmt: skip
    assert code == 0
    data = _strict((out2 / "compare_qk.json").read_text())
    assert data["windows_source"] == "options"
    assert data["windows"]["early"]["snapshots"] == [0, 20]
    assert data["windows"]["late"]["updates"] == [[20, 40]]
    assert data["windows"]["early"]["cos"]["orth"]["grad_ce"]["all"]["n"] == 2
    late = data["windows"]["late"]
    assert late["frame"] == "dual" and late["null95_signs"]["diff"]["all"]["n"] == 1
    assert late["score_change"]["all"]["w_qk"]["n"] == 1
    assert "### early: steps 0-20" in (out2 / "summary.md").read_text()
    for bad in ("early", "x=5:1", "x=1:2,x=2:3"):
        capsys.readouterr()
        assert main(["compare-qk", str(run_dir), "--windows", bad, "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and "window" in err[0], err


@pytest.mark.slow  # a K = 7 compare-qk run (4 s); the pipeline test stays fast
def test_many_variables_use_the_sampled_population(tmp_path, capsys):
    """K = 8 variables do not fit the closed form's 2K <= L - 4 slots: the default uses the
    theorem's model on a sampled population, `--prediction closed` is refused in one line."""
    from empirical.__main__ import main

    cfg = load_run_config(
        ROOT / "configs" / "smoke.toml",
        ["task.K=8", "task.max_assignments=6", "task.r1=[]", "task.r2=[]", "task.eval_size=60",
         "train.steps=20", "train.threads=1", "model.d_model=48"],
    )  # fmt: skip
    path = tmp_path / "k8"
    train_run(cfg, path, progress=False, figures=False)
    opts = Options(batch_size=128, prediction_size=2048, one_step_at=20, one_step_lrs=(1.0,),
                   score_steps=(1.0,), eval_size=60, progress=False)  # fmt: skip
    result = compare_run(path, opts)
    assert result["prediction"] == "population"
    assert result["one_step"]["prediction"] == "population"
    rows = result["labels"]["rows"]
    assert len(rows) == 2 + 8 and result["labels"]["cols"][-1] == "bar_v7"
    for r in result["steps"]:
        c = r["comparison"]["orth"]["grad_lin"]["cos"]["all"]
        assert -1 <= c <= 1
        assert r["terms"]["pred"]["c_mem"] > 0  # the bound number's entry is the largest
    assert main(["compare-qk", str(path), "--prediction", "closed", "--quiet",
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prediction population" in err[0]


def test_snapshots_analysed_ahead_give_the_same_result(run_dir, monkeypatch):
    """follow_snapshots (reproduce: while the run trains) analyses every snapshot that has a
    successor; compare_run then analyses only the last one itself and returns the same numbers
    and blocks as without it. A snapshot rewritten since (another mtime) is analysed again."""
    import os

    from empirical.bridge.compare_qk.follow import SnapshotInputs, follow_snapshots
    from empirical.runs.rundir import RunDir

    opts = Options(
        batch_size=256, one_step=False, progress=False, prediction_size=4096, null_draws=50
    )
    snaps = RunDir(run_dir).snapshots()
    assert len(snaps) >= 3
    inputs = SnapshotInputs.of(run_dir, opts)

    class Stop:  # set once every pair with a successor is analysed
        flag = False

        def is_set(self):
            return self.flag

    stop, analyse, analysed = Stop(), inputs.analyse, []

    def counted(step, *args):
        analysed.append(step)
        stop.flag = len(analysed) == len(snaps) - 1
        return analyse(step, *args)

    inputs.analyse = counted
    done = follow_snapshots(inputs, stop, poll_s=0.0)
    assert len(done) == len(snaps) - 1

    calls = []
    real = SnapshotInputs.analyse
    monkeypatch.setattr(
        SnapshotInputs, "analyse", lambda self, step, *a: calls.append(step) or real(self, step, *a)
    )
    ahead = compare_run(run_dir, opts, done=done)
    assert calls == [snaps[-1][0]]  # only the last snapshot (no successor) analysed here
    reads = []
    read_config = RunDir.read_two_layer_config
    monkeypatch.setattr(
        RunDir, "read_two_layer_config", lambda self, *a: reads.append(a) or read_config(self, *a)
    )
    plain = compare_run(run_dir, opts)
    assert len(reads) == 1  # the run's config is read once (SnapshotInputs.of reuses it)

    def numbers(result):
        out = jsonable({k: v for k, v in result.items() if k not in ("_blocks", "elapsed_s")})
        return json.dumps(out, sort_keys=True)

    assert numbers(ahead) == numbers(plain)
    assert ahead["_blocks"].keys() == plain["_blocks"].keys()
    for name, series in plain["_blocks"].items():
        for (s1, b1), (s2, b2) in zip(series, ahead["_blocks"][name], strict=True):
            assert s1 == s2 and np.array_equal(np.asarray(b1), np.asarray(b2)), name

    # a successor rewritten after the analysis: the pair before it is analysed again
    step1, path1 = snaps[1]
    times = (path1.stat().st_atime_ns, path1.stat().st_mtime_ns)
    os.utime(path1, ns=(times[0], times[1] + 10**9))
    try:
        calls.clear()
        compare_run(run_dir, opts, done=done)
    finally:
        os.utime(path1, ns=times)  # the shared run as it was
    assert calls == [snaps[0][0], step1, snaps[-1][0]]
