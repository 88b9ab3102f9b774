"""Shared test setup for tests/."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Small ops: one torch thread is faster on a 2-core machine (docs/benchmarks.md)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_chain_run(tmp_path_factory):
    """A 3-layer chain run of 4 steps with snapshots at 2 and 4 (tiny widths), trained once
    per pytest process for the chain commands' tests (each writes its own analysis files)."""
    from empirical.runs.config import load_run_config
    from empirical.train.loop import train_run

    cfg = load_run_config("configs/chain.toml", [
        "train.steps=4", "task.eval_size=40", "train.eval_every=2", "train.eval_subsample=0",
        "train.checkpoint_every=4", "train.snapshot_every=2", "train.batch_size=16",
        "model.d_model=16", "model.d_mlp=32"])  # fmt: skip
    run = tmp_path_factory.mktemp("chain") / "run"
    train_run(cfg, run, progress=False, figures=False)
    return run
