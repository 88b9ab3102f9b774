"""compare-qk end to end on a tiny trained run (seconds): files, ranges, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from empirical.compare_qk import Options, compare_run, write_outputs
from empirical.run_config import load_run_config
from empirical.train.loop import train_run
from empirical.train.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
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
    train_run(cfg, path, progress=False)
    return path


def _strict(text: str):
    def bad(x):
        raise ValueError(f"non-JSON constant {x}")

    return json.loads(text, parse_constant=bad)


def test_pipeline_end_to_end(run_dir, tmp_path):
    opts = Options(
        steps=[0, 20, 40], batch_size=256, one_step_at=20, one_step_lrs=(1.0, 30.0),
        score_steps=(1.0, 8.0), eval_size=100, progress=False,
    )  # fmt: skip
    result = compare_run(run_dir, opts)
    assert [r["step"] for r in result["steps"]] == [0, 20, 40]
    assert [r["next_step"] for r in result["steps"]] == [20, 40, None]
    for r in result["steps"]:
        assert r["frame_exact"]  # 36 labelled key vectors in 48 dimensions
        assert 0 < r["a"] < 0.5 and 0 < r["b"] < 1
        assert r["b"] == pytest.approx((1 - 2 * r["a"]) / 14)
        for frame in ("orth", "raw"):
            comp = r["comparison"][frame]
            want = {"grad_ce", "grad_lin", "sgd_factored", "weights_identity"}
            if r["next_step"] is not None:
                want |= {"diff", "diff_perp"}
            assert set(comp) == want
            for name, v in comp.items():
                if name == "weights_identity":
                    continue
                for c in v["cos"].values():
                    assert -1 - 1e-9 <= c <= 1 + 1e-9
                assert 0 <= v["identity"]["row_argmax_on_diag"] <= 1
                assert 0 <= v["attenuation"]["fraction"] <= 1
        half = r["split_half_cos_grad_ce_orth"]["all"]
        assert -1 <= half <= 1
        a = r["assumptions"]
        for key in ("l1_eq_to_operands_mass", "l1_num_to_prev_mass", "ov2_mlp2_accuracy"):
            assert 0 <= a[key] <= 1
        assert 0 <= a["embeddings"]["ebar"]["max_abs_cos"] <= 1
    # the snapshot change is the change of the merged matrix between the two snapshots
    from empirical.compare_qk import coordinates, qk_matrix
    from empirical.model import load_model

    m0, m20 = (load_model(run_dir / "snapshots" / f"step_{s:06d}.pt") for s in (0, 20))
    c = coordinates(m0, 11, 3, 16)
    blocks = dict(result["_blocks"]["raw/diff"])
    np.testing.assert_allclose(blocks[0], c.project(qk_matrix(m20) - qk_matrix(m0)), atol=1e-10)
    # the one-step test: its "before" is the trainer's own evaluation of the same sets
    one = result["one_step"]
    assert one["step"] == 20
    acc20 = next(r for r in read_metrics(run_dir / "metrics.jsonl") if r["step"] == 20)["acc"]
    for name in ("0var/ind", "1var/ind", "2var/ind"):
        assert one["before"][name] == pytest.approx(acc20[name], abs=1.5 / 100)
    fams = one["families"]
    assert set(fams) == {"sgd", "grad_merged", "predicted_orth", "predicted_raw", "random_orth"}
    for fam, rows in fams.items():
        for row in rows:
            assert all(0 <= row[k] <= 1 for k in ("0var/ind", "1var/ind", "2var/ind"))
            if fam != "sgd":
                assert row["rms_dscore"] == pytest.approx(row["t"], rel=1e-4)
    # the prediction's lift moves the block along the prediction (exact frame: 48 dims)
    small = [r for r in fams["predicted_orth"] if r["t"] == 1.0][0]
    assert small["max_abs_dS_orth"] > 0
    paths = write_outputs(result, tmp_path / "out")
    data = _strict(paths["json"].read_text())
    assert data["one_step"]["step"] == 20 and len(data["steps"]) == 3
    for key in ("cosines", "structure", "assumptions", "one_step", "blocks_png"):
        assert paths[key].stat().st_size > 10_000, key
    npz = np.load(paths["blocks"])
    assert npz["orth__grad_ce"].shape == (3, 2 + 3, 11 + 3 + 3 + 16 + 3)
    assert np.isnan(npz["raw__diff"][-1]).all() and np.isfinite(npz["raw__diff"][0]).all()
    assert "| 20 |" in paths["summary"].read_text()


def test_cli(run_dir, tmp_path, capsys):
    from empirical.__main__ import main

    out = tmp_path / "cli"
    code = main(["compare-qk", str(run_dir), "--steps", "20,40", "--batch-size", "128",
                 "--no-one-step", "--no-figures", "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 0
    data = _strict((out / "compare_qk.json").read_text())
    assert [r["step"] for r in data["steps"]] == [20, 40]
    assert "one_step" not in data
    assert main(["compare-qk", str(tmp_path / "missing")]) == 2
    assert main(["compare-qk", str(run_dir), "--steps", "41", "--quiet"]) == 2
    assert "no snapshot at steps [41]" in capsys.readouterr().err
