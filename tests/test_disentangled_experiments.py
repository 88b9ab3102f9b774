"""One-step composition (Theorem C.1, check 6), dynamics, random embeddings, and the CLI."""

import itertools
import json
import math
import subprocess
import sys
from collections import Counter

import pytest
import torch

from disentangled import Basis, SimConfig, g1, initial_W
from disentangled.__main__ import main
from disentangled.experiments import (
    SOLVED,
    _solves,
    dynamics,
    one_step,
    random_embedding,
    random_embedding_table,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _w0_2var_bound(cfg) -> float:
    """At W0 the attention of a 2-var sequence does not depend on (v1, v2), so for fixed
    values m the prediction is one y for all K^2 operand pairs: accuracy <= E_m max_y
    #{(v1, v2): m_v1 + m_v2 = y} / K^2 (the layout does not matter)."""
    total = 0.0
    for m in itertools.product(range(cfg.p), repeat=cfg.K):
        counts = Counter((a + b) % cfg.p for a in m for b in m)
        total += max(counts.values()) / cfg.K**2
    return total / cfg.p**cfg.K


CONFIGS = [
    SimConfig(p=5, K=3, beta=4.0),
    SimConfig(p=7, K=2, beta=3.0),
    SimConfig(p=3, K=2, beta=2.0),
    SimConfig(p=5, K=2, beta=5.0, operand_order="swapped"),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_one_step_composes(cfg):
    res = one_step(cfg)
    before = res.before
    assert before["2var"] <= _w0_2var_bound(cfg) + 1e-12 and before["2var"] < 1
    assert before["0var"] >= SOLVED  # W0 attends to the operands: 0-var is solved
    assert any(r["2var"] >= SOLVED for r in res.rows), "no eta solves 2-var"
    lo, hi = res.solving_intervals[0]
    W0, G1 = initial_W(cfg), g1(cfg)
    assert _solves(W0, G1, lo, cfg) and not _solves(W0, G1, lo * (1 - 3e-3), cfg)
    if hi is not None:
        assert _solves(W0, G1, hi, cfg) and not _solves(W0, G1, hi * (1 + 3e-3), cfg)
    # the grid rows agree with the intervals
    for r in res.rows:
        inside = any(
            a <= r["eta"] and (b is None or r["eta"] <= b) for a, b in res.solving_intervals
        )
        assert inside == (r["2var"] >= SOLVED)


def test_one_step_respects_given_etas_and_validates():
    cfg = SimConfig(p=3, K=2)
    res = one_step(cfg, [1.0, 10.0, 1e4], refine=False)
    assert [r["eta"] for r in res.rows] == [1.0, 10.0, 1e4]
    assert "2-var" in res.to_markdown()
    with pytest.raises(ValueError):
        one_step(cfg, [-1.0])


def test_dynamics_small_lr_decreases_loss():
    cfg = SimConfig(p=3, K=2, beta=3.0)
    out = dynamics(cfg, steps=4, lr=0.05, xi=5.0, mix={"1var": 1, "2var": 1})
    hist = out["history"]
    assert [h["step"] for h in hist] == list(range(5))
    losses = [h["loss"] for h in hist]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))
    assert torch.tensor(hist[0]["ebar_block"]).abs().max() == 0
    assert torch.tensor(hist[-1]["ebar_block"]).shape == (cfg.K, cfg.K)
    assert math.isclose(sum(out["mix"].values()), 1.0)
    for h in hist:
        assert set(h["accuracy"]) == {"0var", "1var", "2var"}
        assert 0 <= h["bound_mass"]["1var"] <= 1
    with pytest.raises(ValueError):
        dynamics(cfg, steps=-1)


def test_random_embedding_recovers_orthogonal_model_at_large_d():
    cfg = SimConfig(p=3, K=2, beta=2.0)
    res = random_embedding(cfg, [8, 2**18], seeds=2)
    assert res["orthogonal_after"]["2var"] >= SOLVED
    for big in [r for r in res["rows"] if r["d"] == 2**18]:
        # 2-var (large margins after the step) and 0-var before it (W0 attends to operands);
        # 1-var is left out: at this eta its margins are tiny in the orthogonal model too
        assert big["mapped"]["2var"] >= SOLVED and big["recomputed"]["2var"] >= SOLVED
        assert big["before"]["0var"] >= SOLVED
    assert "| 8 |" in random_embedding_table(res)


# ---------------------------------------------------------------------------------- CLI
def _run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_g1_json_is_exact(capsys):
    rc, out, err = _run(["g1", "--p", "3", "--K", "2", "--beta", "2.5", "--format", "json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert list(data) == ["basis", "G1"]
    cfg = SimConfig(p=3, K=2, beta=2.5)
    assert data["basis"] == Basis.from_config(cfg).labels
    assert torch.equal(torch.tensor(data["G1"], dtype=torch.float64), g1(cfg))


def test_cli_g1_table(capsys):
    rc, out, _ = _run(["g1", "--format", "table", "--top", "3"], capsys)
    assert rc == 0
    rows = out.strip().splitlines()[2:]
    assert len(rows) == 3 and rows[0].split()[:2] == ["=", "pos14"]


@pytest.mark.parametrize(
    "argv, start",
    [
        (["g1", "--K", "7"], "error: --K=7: 2K must be <= 12"),
        (["g1", "--p", "2"], "error: --p=2:"),
        (["g1", "--K", "1"], "error: --K=1:"),
        (["g1", "--beta", "nan"], "error: --beta=nan:"),
        (["dynamics", "--steps", "-3", "--out", "x"], "error: --steps=-3"),
        (["step", "--etas", "0"], "error: --etas=0.0"),
        (["g1", "--p", "five"], "error: argument --p"),
        (["random-embedding", "--dims", "0"], "error: --dims=0"),
    ],
)
def test_cli_bad_arguments_one_line_exit_2(argv, start, capsys):
    rc, out, err = _run(argv, capsys)
    assert rc == 2
    assert err.startswith(start) and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_cli_subprocess_exit_code():
    proc = subprocess.run(
        [sys.executable, "-m", "disentangled", "step", "--K", "9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: --K=9") and len(proc.stderr.splitlines()) == 1


def test_cli_writes_outputs(tmp_path, capsys):
    args = ["--p", "3", "--K", "2", "--beta", "2"]
    assert main(["step", *args, "--etas", "1", "100", "1000", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "one_step.json").read_text())["rows"][0]["eta"] == 1.0
    assert "| eta |" in (tmp_path / "one_step.md").read_text()
    assert main(["dynamics", *args, "--steps", "2", "--out", str(tmp_path)]) == 0
    assert len(json.loads((tmp_path / "dynamics.json").read_text())["history"]) == 3
    assert (tmp_path / "dynamics.png").stat().st_size > 10_000
    assert (
        main(["random-embedding", *args, "--dims", "16", "--seeds", "1", "--out", str(tmp_path)])
        == 0
    )
    assert (tmp_path / "random_embedding.png").stat().st_size > 10_000
    capsys.readouterr()
