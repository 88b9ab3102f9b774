"""The assumption ladder (empirical/bridge/ladder/) on a tiny trained run: the last rung's
gradient is compare-qk's observed cross-entropy gradient, every rung changes exactly one named
piece, every rung's forward is its model's own hooked forward, and the CLI's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.bridge.compare_qk.observe import Weights, gradients, layer1, one_var_batch
from empirical.bridge.ladder.forward import Forward, hooked_logits, routing_pattern
from empirical.bridge.ladder.options import LadderOptions
from empirical.bridge.ladder.outputs import report
from empirical.bridge.ladder.rungs import PIECES, build_rungs
from empirical.bridge.ladder.snapshot_ladder import run_ladder
from empirical.bridge.ladder.weights import build_model
from empirical.report.writer import write_report
from empirical.runs.config import load_run_config
from empirical.task.pairs import held_out_pairs
from empirical.train.loop import train_run

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(batch_size=256, prediction_size=2048, eval_size=60, grid=(1.0, 10.0),
             eval_sets=("2var/ind", "1var/ind"))  # fmt: skip


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def tiny_run(tmp_path_factory):
    cfg = load_run_config(
        ROOT / "configs" / "smoke.toml",
        ["task.eval_size=100", "train.steps=40", "train.lr=0.003", "train.threads=1",
         "model.d_model=48"],
    )  # fmt: skip
    path = tmp_path_factory.mktemp("ladder") / "run"
    torch.set_num_threads(1)
    train_run(cfg, path, progress=False, figures=False)
    return path, cfg


@pytest.fixture(scope="session")
def ladder_result(tiny_run):
    path, _ = tiny_run
    return run_ladder(path, LadderOptions(step=20, progress=False, **SMALL))


def test_last_rung_is_compare_qk_gradient(tiny_run, ladder_result):
    """The 'trained' rung's -dL/dW_QK equals compare-qk's grad_ce on the same batch."""
    from empirical.model.checkpoint import load_model
    from empirical.runs.rundir import RunDir

    path, cfg = tiny_run
    task = cfg.task
    model = load_model(dict(RunDir(path).snapshots())[20])
    held = held_out_pairs(task, cfg.seed)
    batch = one_var_batch(task, SMALL["batch_size"], 0, "mixed", "train", held)
    w = Weights.of(model)
    expected = -gradients(w, layer1(w, batch.tokens).resid1, batch.labels, "ce").G_QK
    ours = -ladder_result["rungs"][7]["_grad_ce"]
    assert ladder_result["rungs"][7]["name"] == "trained"
    # the ladder's models store W_QK at scale sqrt(d_model); compare-qk's at sqrt(d_head)
    ratio = model.cfg.attn_scale / (model.cfg.d_model**0.5)
    err = (ours * ratio - expected).abs().max() / expected.abs().max()
    assert float(err) < 1e-6


def test_every_rung_changes_one_named_piece(ladder_result, tmp_path):
    paths = write_report(report(ladder_result), tmp_path, figures=False)
    assert set(paths) == {"ladder.json", "summary.md", "blocks.npz"}
    data = json.loads(paths["ladder.json"].read_text())
    rungs = data["rungs"]
    assert [r["name"] for r in rungs] == [
        "theorem", "order", "data", "loss", "readout", "layer1", "embeddings", "trained",
        "optimiser",
    ]  # fmt: skip
    assert set(rungs[0]["pieces"].values()) == {"theorem"} and rungs[0]["changed"] is None
    assert set(rungs[-1]["pieces"].values()) == {"trained"}
    for before, after in zip(rungs, rungs[1:], strict=False):
        diff = [k for k in PIECES if before["pieces"][k] != after["pieces"][k]]
        assert diff == [after["changed"]], (after["name"], diff)
    for r in rungs:  # the schema
        for key in ("cos_whole", "cos_bar_v", "null_whole", "null_bar_v", "memory_share"):
            assert key in r
        for fam in ("one_step", "g1_step"):
            assert set(r[fam]) >= {"best_eta", "accuracy"}
            assert set(r[fam]["accuracy"]) == set(data["eval_sets"])
        assert r["hooked_max_abs_diff"] < 1e-10
    # the theorem's end: its gradient is G1 up to the Monte Carlo of the two samples
    assert rungs[0]["cos_whole"] > 0.9


def test_routing_rungs_need_the_hook(tiny_run):
    """The theorem's routing is what the hooked forward runs (without the hook the readout
    rung's logits differ), and it writes ebar only onto bound numbers and the query."""
    from empirical.model.checkpoint import load_model
    from empirical.runs.rundir import RunDir

    path, cfg = tiny_run
    task = cfg.task
    p, K, L = task.p, task.K, task.L
    model = load_model(dict(RunDir(path).snapshots())[20])
    rung = build_rungs(model, p, K, L, beta=1.0, xi=5.0)[4]
    assert rung.name == "readout" and rung.routing
    tokens = one_var_batch(task, 32, 1).tokens
    m = build_model(rung.w, p, K, L)
    ours = Forward(rung.w, True, p, K).logits(tokens)
    assert torch.allclose(ours, hooked_logits(m, tokens, True, p, K), atol=1e-10)
    assert not torch.allclose(ours, hooked_logits(m, tokens, False, p, K), atol=1e-6)
    pat = routing_pattern(tokens, p, K)
    is_var = (tokens >= p) & (tokens < p + K)
    var_weight = (pat * is_var[:, None, :].double()).sum(-1)  # weight on variable keys
    bound = torch.zeros_like(is_var)
    bound[:, 1 : L - 4] = (tokens[:, 1 : L - 4] < p) & is_var[:, : L - 5]
    assert torch.all(var_weight[:, : L - 4][bound[:, : L - 4]] == 0.5)
    assert torch.all(var_weight[:, : L - 4][~bound[:, : L - 4]] == 0.0)


@pytest.mark.slow
def test_the_ladder_figure_is_written(ladder_result, tmp_path):
    paths = write_report(report(ladder_result), tmp_path, fmt="png")
    assert paths["ladder"] == tmp_path / "ladder.png"
    assert paths["ladder"].stat().st_size > 10_000
    assert not list(tmp_path.glob(".*"))  # written atomically: no temporary file left


@pytest.mark.slow
def test_last_rung_on_the_papers_run():
    """At step 5 301 of the paper's run (imported at runs/authors): the 'trained' rung's
    gradient is compare-qk's cross-entropy gradient to 1e-6 (512 sequences)."""
    from empirical.bridge.ladder.forward import qk_gradient
    from empirical.config.paths import authors_checkpoints, repo_root
    from empirical.model.checkpoint import load_model
    from empirical.runs.rundir import RunDir

    run = repo_root() / "runs" / "authors"
    if not (run / "snapshots" / "step_005301.pt").exists():
        pytest.skip(
            f"no {run} (import it: python -m empirical import-checkpoints "
            f"{authors_checkpoints()} --config configs/authors.toml --out runs/authors)"
        )
    rd = RunDir(run)
    cfg = rd.read_two_layer_config("ladder")
    task = cfg.task
    model = load_model(dict(rd.snapshots())[5301])
    batch = one_var_batch(task, 512, 0, "mixed", "train", held_out_pairs(task, cfg.seed))
    w = Weights.of(model)
    expected = gradients(w, layer1(w, batch.tokens).resid1, batch.labels, "ce").G_QK
    rung = build_rungs(model, task.p, task.K, task.L, beta=1.5, xi=1.0)[-1]
    assert rung.name == "trained"
    fwd = Forward(rung.w, False, task.p, task.K)
    resid1 = fwd.resid1(batch.tokens)
    _, g, _ = qk_gradient(fwd, resid1, batch.labels, "ce")
    ratio = model.cfg.attn_scale / (model.cfg.d_model**0.5)
    assert float((g * ratio - expected).abs().max() / expected.abs().max()) < 1e-6


def test_the_command_line_is_the_librarys_options():
    """`ladder`'s flags are LadderOptions' fields, with their defaults; --eval-size 0 and
    --quiet reach the library as all sequences and no progress."""
    from empirical.bridge.ladder.options import DEFAULT_GRID, LadderCommandOptions
    from empirical.config.options import build_parser

    command = LadderCommandOptions(run_dir="RUN", eval_size=0, quiet=True)
    assert command.library_options() == LadderOptions(eval_size=None, progress=False)
    assert LadderOptions().grid == DEFAULT_GRID
    shown = " ".join(build_parser(LadderCommandOptions).format_help().split())
    assert "scores (default 0.1,0.3,1.0,3.0,10.0,30.0)" in shown
