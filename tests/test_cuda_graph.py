"""The training step replayed as a CUDA graph (train.cuda_graph): the same training as the
eager step, resumable, portable checkpoints, and the eager fallback once a member stops.

The CUDA tests run where a GPU is (scripts/gpu_session.sh runs this file first on a lent
machine); on a CPU they are skipped and the rest checks what does not need a GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from disentangled.errors import UserError
from empirical.experiments.sweep.trainer import train_batch
from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.train.cuda_graph import graph_applies
from empirical.train.engine import restore_data_generator
from empirical.train.learners import BatchLearner, SingleLearner
from empirical.train.loop import train_run
from empirical.train.optim import load_optimizer_state, portable_optimizer_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def smoke(*overrides: str):
    return load_run_config(
        SMOKE,
        [
            "task.eval_size=200",
            "train.steps=100",
            "train.lr=0.003",
            "train.lr_schedule=cosine",  # the learning rate changes every step
            "train.warmup_steps=10",
            "train.snapshot_every=0",
            *overrides,
        ],
    )


# -- without a GPU ---------------------------------------------------------------------------


def test_graph_applies_only_on_cuda_without_compile():
    cuda_dev, cpu = torch.device("cuda"), torch.device("cpu")
    assert graph_applies(cuda_dev, True, "none")
    assert not graph_applies(cuda_dev, False, "none")
    assert not graph_applies(cuda_dev, True, "reduce-overhead")
    assert not graph_applies(cpu, True, "none")


def test_cuda_graph_must_be_a_bool():
    with pytest.raises(UserError, match="train.cuda_graph: expected true or false"):
        load_run_config(SMOKE, ['train.cuda_graph="always"'])
    assert load_run_config(SMOKE, ["train.cuda_graph=false"]).train.cuda_graph is False


def test_portable_state_drops_device_flags_and_tensor_lr():
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([p], lr=1e-3)
    p.grad = torch.ones(3)
    opt.step()
    state = opt.state_dict()
    state["param_groups"][0].update(fused=True, capturable=True, lr=torch.tensor(2e-3))
    portable = portable_optimizer_state(state)
    group = portable["param_groups"][0]
    assert (group["fused"], group["capturable"], group["foreach"]) == (None, False, None)
    assert isinstance(group["lr"], float) and math.isclose(group["lr"], 2e-3, rel_tol=1e-6)
    # a state written by a fused CUDA optimiser loads into a CPU one, keeping the CPU's flags
    fresh = torch.optim.AdamW([torch.nn.Parameter(torch.ones(3))], lr=1e-3)
    load_optimizer_state(fresh, state)
    assert fresh.param_groups[0]["fused"] is None and not fresh.param_groups[0]["capturable"]
    fresh.step()  # no "fused requires CUDA" error


def test_a_data_generator_state_from_another_device_reseeds_the_stream():
    gen = torch.Generator().manual_seed(1)
    own = gen.get_state()
    assert restore_data_generator(gen, own, seed=0, step=40) is False
    assert torch.equal(gen.get_state(), own)
    cuda_like = torch.zeros(16, dtype=torch.uint8)  # a CUDA generator's state: 16 bytes
    assert restore_data_generator(gen, cuda_like, seed=0, step=40) is True
    first = torch.rand(3, generator=gen)
    restore_data_generator(gen, cuda_like, seed=0, step=40)
    assert torch.equal(torch.rand(3, generator=gen), first)  # deterministic
    restore_data_generator(gen, cuda_like, seed=0, step=60)
    assert not torch.equal(torch.rand(3, generator=gen), first)


def test_cpu_runs_say_their_steps_were_eager(tmp_path):
    cfg = smoke("train.steps=20", "train.eval_every=10", "train.device=cpu")
    train_run(cfg, tmp_path, progress=False, figures=False)
    session = json.loads((tmp_path / "summary.json").read_text())["last_session"]
    assert session["step_mode"] == "eager" and session["steps"] == 20
    assert set(session) >= {"setup_s", "training_steps_s", "evaluations_s", "checkpoints_s"}


# -- on a GPU --------------------------------------------------------------------------------


def train_losses(path: Path) -> list[float]:
    return [r["train_loss"] for r in read_metrics(path / "metrics.jsonl")[1:]]


def assert_close_runs(a: Path, b: Path) -> None:
    """Two runs of one config on one GPU: equal up to the GPU's own nondeterminism."""
    la, lb = train_losses(a), train_losses(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb, strict=True):
        assert math.isclose(x, y, rel_tol=1e-3, abs_tol=1e-5), (la, lb)
    fa = read_metrics(a / "metrics.jsonl")[-1]["acc"]
    fb = read_metrics(b / "metrics.jsonl")[-1]["acc"]
    assert all(abs(fa[k] - fb[k]) <= 0.02 for k in fa), (fa, fb)


@cuda
def test_a_graphed_run_trains_as_the_eager_run(tmp_path):
    train_run(smoke("train.device=cuda", "train.cuda_graph=false"), tmp_path / "eager",
              progress=False)  # fmt: skip
    train_run(smoke("train.device=cuda"), tmp_path / "graph", progress=False, figures=False)
    assert_close_runs(tmp_path / "eager", tmp_path / "graph")
    summary = json.loads((tmp_path / "graph" / "summary.json").read_text())
    assert summary["last_session"]["step_mode"] == "cuda_graph"
    eager = json.loads((tmp_path / "eager" / "summary.json").read_text())
    assert eager["last_session"]["step_mode"] == "eager"


@cuda
def test_a_graphed_run_with_clipping_and_bf16_trains_as_the_eager_run(tmp_path):
    extra = ("train.device=cuda", "train.grad_clip=0.5", "train.autocast=bf16")
    train_run(
        smoke(*extra, "train.cuda_graph=false"), tmp_path / "eager", progress=False, figures=False,
    )
    train_run(smoke(*extra), tmp_path / "graph", progress=False, figures=False)
    assert_close_runs(tmp_path / "eager", tmp_path / "graph")


@cuda
def test_graphed_batched_members_train_as_eager_ones(tmp_path):
    def members(tag: str, *extra: str):
        cfgs = [smoke("train.device=cuda", f"seed={s}", *extra) for s in (0, 1, 2)]
        return [(c, tmp_path / f"{tag}{i}") for i, c in enumerate(cfgs)]

    train_batch(members("eager", "train.cuda_graph=false"), progress=False, figures=False)
    train_batch(members("graph"), progress=False, figures=False)
    for i in range(3):
        assert_close_runs(tmp_path / f"eager{i}", tmp_path / f"graph{i}")


@cuda
def test_a_graphed_run_resumes_on_the_gpu_and_on_the_cpu(tmp_path):
    cfg = smoke("train.device=cuda", "train.checkpoint_every=20")
    train_run(cfg, tmp_path / "whole", progress=False, figures=False)
    train_run(cfg, tmp_path / "split", progress=False, stop_at=40)
    train_run(cfg, tmp_path / "split", resume=True, progress=False, figures=False)
    assert_close_runs(tmp_path / "whole", tmp_path / "split")
    # a checkpoint of the graphed run resumes on the CPU (portable optimiser state)
    train_run(cfg, tmp_path / "moved", progress=False, stop_at=40)
    moved = smoke("train.device=cpu", "train.checkpoint_every=20")
    train_run(moved, tmp_path / "moved", resume=True, progress=False, figures=False)
    assert len(train_losses(tmp_path / "moved")) == len(train_losses(tmp_path / "whole"))
    assert all(math.isfinite(x) for x in train_losses(tmp_path / "moved"))


@cuda
def test_a_stopped_member_falls_back_to_the_eager_step():
    device = torch.device("cuda")
    cfgs = [smoke("train.device=cuda", f"seed={s}") for s in (0, 1)]
    learner = BatchLearner(cfgs, device)
    g = torch.Generator(device=device).manual_seed(0)
    tokens = torch.randint(0, 11, (2, 64, cfgs[0].task.L), device=device, generator=g)
    labels = torch.randint(0, 11, (2, 64), device=device, generator=g)
    for step in range(6):  # 3 eager warm-up steps, the capture, replays
        learner.train_step(tokens, labels, [True, True], step)
    assert learner.graphed is not None and learner.graphed.graph is not None
    before = learner.model.member_state(0)
    for step in (6, 7):  # the masked update, eagerly
        losses = learner.train_step(tokens, labels, [True, False], step)
        assert learner.graphed is None and torch.isfinite(losses).all()
    after = learner.model.member_state(0)
    assert any(not torch.equal(after[k], before[k]) for k in before)  # the live one trains


@cuda
def test_a_single_learner_replays_with_the_schedules_learning_rate():
    device = torch.device("cuda")
    cfg = smoke("train.device=cuda")
    learner = SingleLearner(cfg, device)
    g = torch.Generator(device=device).manual_seed(0)
    tokens = torch.randint(0, 11, (1, 64, cfg.task.L), device=device, generator=g)
    labels = torch.randint(0, 11, (1, 64), device=device, generator=g)
    for step in range(8):
        learner.train_step(tokens, labels, [True], step)
    torch.cuda.synchronize()
    assert float(learner.graphed.lr) == pytest.approx(0.003 * 8 / 10, rel=1e-6)  # warm-up
    state = learner.optimizer_state(0)
    assert isinstance(state["param_groups"][0]["lr"], float)
