"""The update constraints (train.freeze, train.project_out: empirical/train/constraints.py) and
`python -m empirical intervene` (empirical/bridge/interventions) on a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from empirical.bridge.interventions.conditions import member_configs
from empirical.bridge.interventions.continuations import Plan, continue_members
from empirical.cli import intervene as intervene_cli
from empirical.config.io import ConfigError
from empirical.model.checkpoint import load_checkpoint
from empirical.model.labels import col_labels, row_labels
from empirical.runs.config import load_run_config
from empirical.runs.rundir import RunDir
from empirical.train.constraints import UpdateConstraints, save_direction
from empirical.train.loop import train_run
from empirical.train.state import load_training_state

SMOKE = ["train.steps=40", "task.eval_size=200", "train.snapshot_every=10"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    cfg = load_run_config("configs/smoke.toml", SMOKE)
    run = tmp_path_factory.mktemp("iv") / "run"
    train_run(cfg, run, progress=False, stop_at=20)
    return run


def test_frozen_groups_keep_their_values_exactly(tmp_path):
    cfg = load_run_config("configs/smoke.toml",
                          ["train.steps=10", 'train.freeze=["layer2_qk", "W_E"]'])  # fmt: skip
    train_run(cfg, tmp_path / "run", progress=False, figures=False)
    first = load_checkpoint(tmp_path / "run" / "snapshots" / "step_000000.pt")["model_state"]
    last = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["model_state"]
    for name in ("embed.W_E", "blocks.1.attn.W_Q", "blocks.1.attn.W_K"):
        assert torch.equal(first[name], last[name]), name
    for name in ("pos_embed.W_pos", "blocks.0.attn.W_Q", "blocks.1.attn.W_V", "unembed.W_U"):
        assert not torch.equal(first[name], last[name]), name


def test_a_bad_group_or_direction_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a parameter group"):
        load_run_config("configs/smoke.toml", ['train.freeze=["layer3_qk"]'])
    cfg = load_run_config("configs/smoke.toml", [f"train.project_out={tmp_path / 'none.pt'}"])
    names = ["blocks.1.attn.W_Q"]
    with pytest.raises(ConfigError, match="no such file"):
        UpdateConstraints.of([cfg], names)


def _values(seed: int, p=11, K=3, L=16, d=32):
    from empirical.model.config import ModelConfig
    from empirical.model.transformer import AssignAddTransformer

    model = AssignAddTransformer(ModelConfig.for_task(p=p, K=K, L=L).filled(), seed=seed)
    return {n: v.detach().clone().unsqueeze(0) for n, v in model.named_parameters()}


def test_the_projection_removes_the_directions_component_of_the_qk_update(tmp_path):
    p, K, L = 11, 3, 16
    rows, cols = row_labels(K, L), col_labels(p, K, L)
    G = np.random.default_rng(0).normal(size=(len(rows), len(cols)))
    save_direction(tmp_path / "g.pt", G, rows, cols)
    cfg = load_run_config("configs/smoke.toml", [f"train.project_out={tmp_path / 'g.pt'}"])
    values = _values(1)
    constraints = UpdateConstraints.of([cfg], list(values))
    constraints.before_step(values, {n: None for n in values})
    Y = constraints._saved[("frame", 0)]
    WQ0, WK0 = constraints._saved[("qk", 0)]
    gen = torch.Generator().manual_seed(2)
    for n in ("blocks.1.attn.W_Q", "blocks.1.attn.W_K"):  # an optimiser's step, made up
        values[n] += 1e-2 * torch.randn(values[n].shape, generator=gen)
    WQ1, WK1 = (
        values["blocks.1.attn.W_Q"][0, 0].double(),
        values["blocks.1.attn.W_K"][0, 0].double(),
    )
    before = float((Y * (WQ1 @ WK1.T - WQ0 @ WK0.T)).sum())
    constraints.after_step(values)
    WQ2, WK2 = (
        values["blocks.1.attn.W_Q"][0, 0].double(),
        values["blocks.1.attn.W_K"][0, 0].double(),
    )
    after = float((Y * (WQ2 @ WK2.T - WQ0 @ WK0.T)).sum())
    assert abs(before) > 1e-4  # the made-up step had a component (the test can fail)
    assert abs(after) < 1e-5 * abs(before)  # float32 weights: removed to rounding
    # the rest of the update stays: the projection moves the factors little
    moved = (WQ2 - WQ1).norm() / (WQ1 - WQ0).norm()
    assert moved < 0.5


def test_continuations_as_a_batch(tiny_run, tmp_path):
    run = RunDir(tiny_run)
    cfg = run.read_config()
    ckpt = load_training_state(run.last_checkpoint)
    members = member_configs(cfg, ["none", "freeze_layer2_qk"], 2, None)
    plan = Plan(steps=10, replicates=2, conditions=("none", "freeze_layer2_qk"), eval_every=5,
                eval_size=50, cosine_steps=(10,))  # fmt: skip
    out = continue_members(cfg, ckpt, members, run.read_eval_sets(cfg), plan, progress=False)
    assert out["eval_steps"] == [20, 25, 30]
    U = out["updates"][10]
    assert np.abs(U[2]).max() == 0.0 and np.abs(U[3]).max() == 0.0  # frozen W_QK: no update
    assert np.abs(U[0]).max() > 0
    assert not np.array_equal(U[0], U[1])  # two data orders
    # replicate r of each condition saw the same batches: same first evaluation
    assert [m["curve"]["1var/ind"][0] for m in out["members"]] == [
        out["members"][0]["curve"]["1var/ind"][0]
    ] * 4


def test_the_intervene_command(tiny_run, tmp_path, capsys):
    out, ckpt = tmp_path / "iv", str(RunDir(tiny_run).last_checkpoint)
    code = intervene_cli.main([str(tiny_run), "--checkpoint", ckpt,
                               "--steps", "10", "--replicates", "2", "--eval-every", "5",
                               "--eval-size", "50", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    saved = json.loads((out / "interventions.json").read_text())
    assert set(saved["conditions"]) == {"none", "freeze_layer2_qk", "freeze_layer1_embed",
                                        "project_g1", "freeze_mlp", "freeze_layer2_ov"}
    assert saved["conditions"]["freeze_layer2_qk"]["n"] == 2
    # the controls: how many weights each freeze holds, counted in the run's model
    frozen = {k: v["frozen_entries"] for k, v in saved["conditions"].items()}
    assert frozen["none"] == 0 and frozen["project_g1"] == 0
    cfg = RunDir(tiny_run).read_config().built_model_config()
    assert frozen["freeze_mlp"] == 2 * cfg.d_model * cfg.d_mlp * (cfg.n_layers - 1)
    assert frozen["freeze_layer2_ov"] == 2 * cfg.d_model * cfg.d_head * cfg.n_heads
    assert 0 <= saved["noise_ceiling"]["10"]["g1_share_mean"] <= 1
    assert "logrank_vs_none" in saved["conditions"]["project_g1"]
    assert (out / "survival.png").is_file() and (out / "summary.md").is_file()
    bad = ["--conditions", "none,melt", "--out", str(tmp_path / "x")]
    assert intervene_cli.main([str(tiny_run), "--checkpoint", ckpt, *bad]) == 2
    assert "allowed none" in capsys.readouterr().err


def test_interventions_of_several_checkpoints_are_pooled(tiny_run, tmp_path):
    """`pool-interventions`: two intervene outputs (here of the same checkpoint) side by side;
    the pooled count is the sum, each source's delay is its median against its own none."""
    from empirical.__main__ import main as empirical_main

    ckpt = str(RunDir(tiny_run).last_checkpoint)
    dirs = []
    for i in (0, 1):
        out = tmp_path / f"iv{i}"
        assert intervene_cli.main([str(tiny_run), "--checkpoint", ckpt, "--steps", "10",
                                   "--replicates", "2", "--eval-every", "5", "--eval-size", "50",
                                   "--conditions", "none,freeze_mlp", "--threshold", "0.01",
                                   "--out", str(out), "--quiet"]) == 0  # fmt: skip
        dirs.append(str(out))
    pooled_dir = tmp_path / "pooled"
    assert empirical_main(["pool-interventions", *dirs, "--names", "a", "b", "--out",
                           str(pooled_dir), "--quiet"]) == 0  # fmt: skip
    pooled = json.loads((pooled_dir / "pooled.json").read_text())
    none = pooled["conditions"]["none"]
    assert none["n"] == 4 and [p["name"] for p in none["per_source"]] == ["a", "b"]
    assert none["jumped"] == sum(p["jumped"] for p in none["per_source"])
    assert all(p["delay"] in (0, None) for p in none["per_source"])
    assert "pool-interventions" in pooled["provenance"]["command"]
    assert "| freeze_mlp |" in (pooled_dir / "summary.md").read_text()
    assert empirical_main(["pool-interventions", str(tmp_path), "--out", str(tmp_path / "x")]) == 2


def test_pooling_computes_each_conditions_log_rank_again_from_its_jump_steps():
    """A file written before the log-rank's zero-variance fix holds p = None where every
    continuation jumped at the same step in both conditions; pooled, the p comes from the
    stored jump steps (1: nothing tells them apart), and a real difference keeps its small p."""
    from empirical.bridge.interventions.pooled import pool

    def source(g1_steps):
        return {"start": 3000, "last_step": 4000, "steps": 1000, "replicates": 8, "jump": "j",
                "noise_ceiling": {}, "conditions": {
                    "none": {"n": 8, "jumped": 8, "jump_steps": [3550] * 8, "median_jump": 3550},
                    "project_g1": {"n": 8, "jumped": 8, "jump_steps": g1_steps,
                                   "median_jump": float(g1_steps[0]),
                                   "logrank_vs_none": {"pvalue": None}}}}  # fmt: skip

    same = pool([source([3550] * 8)], ["s0"])["conditions"]["project_g1"]["per_source"][0]
    later = pool([source([3700] * 8)], ["s0"])["conditions"]["project_g1"]["per_source"][0]
    assert same["logrank_p"] == 1.0
    assert later["logrank_p"] < 1e-3 and later["delay"] == 150
