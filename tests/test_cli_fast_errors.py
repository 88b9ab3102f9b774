"""Argument and config errors of every `python -m empirical` command are answered before
torch is imported (issue 24, item 5: a bad override in well under a second, not 3-13 s).

One subprocess runs every case through `empirical.__main__.main` in turn and reports, after
each, its exit status, its `error:` line and whether torch is in sys.modules: the first case
that imports torch shows up as the case that did it. The timing itself is measured by
benchmarks/bench_cli_errors.py, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from empirical.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[1]

RUN_CASES = """
import contextlib, io, json, sys
from empirical.__main__ import main
results = []
for argv in json.loads(sys.stdin.read()):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    results.append({"argv": argv, "rc": rc, "stderr": err.getvalue(),
                    "torch": "torch" in sys.modules})
print(json.dumps(results))
"""


def cases(tmp: Path) -> list[tuple[list[str], str]]:
    """(argv, a fragment of the expected error line): at least one bad argument or config per
    command, and the kinds the issue names (bad override value, unknown field, flag typo,
    config that is not TOML, missing run directory)."""
    bad = tmp / "bad.toml"
    bad.write_text('name = "x"\n[train\nsteps = 1\n')
    missing = str(tmp / "missing")
    src = tmp / "src"
    src.mkdir()
    return [
        (["no-such-command"], "unknown command"),
        (["sample", "task.p=-1"], "task.p = -1"),
        (["sample", "task.bogus=1"], "unknown field 'bogus'"),
        (["sample", "--spilt", "train"], "did you mean --split?"),
        (["sample", "--config", str(bad)], "is not valid TOML"),
        (["train", "train.steps=-1"], "train.steps = -1 must be an integer >= 1"),
        (["train", "train.stpes=1"], "did you mean train.steps?"),
        (["train", "--steps", "100"], "train.steps=100"),
        (["train", "--config", str(bad)], "is not valid TOML"),
        (["train", "--config", "configs/smoke.toml", "--stop-at", "0"], "--stop-at 0: allowed"),
        (["train", "--resume", missing], "holds no config.toml"),
        (["evaluate", missing], "no such directory"),
        (["evaluate", missing, "--batch-size", "0"], "--batch-size 0"),
        (["import-checkpoints", str(src), "--out", missing, "train.steps=-1"], "train.steps"),
        (["import-checkpoints", missing, "--out", missing], "no such folder"),
        (["curves", missing, "--out", str(tmp / "c.png")], "no such directory"),
        (["analyze", missing], "no such directory"),
        (["attribute", missing, "--window", "1:2"], "no such directory"),
        (["intervene", missing, "--checkpoint", "x"], "no such directory"),
        (["analyze", missing, "--first-spike-steps", "3,1"], "must come before"),
        (["codes", missing], "not a run directory"),
        (["codes", missing, "--test-size", "0"], "--test-size 0"),
        (["compare-qk", missing], "no such directory"),
        (["compare-qk", missing, "--windows", "bad"], "window 'bad'"),
        (["chain-attention", missing], "no such directory"),
        (["chain-attention", missing, "--n", "0"], "--n 0"),
        (["chain-patching", missing], "no such directory"),
        (["chain-patching", missing, "--n", "0"], "--n 0"),
        (["chain-compare-qk", missing], "no such directory"),
        (["chain-compare-qk", missing, "--n", "0"], "--n 0"),
        (["ladder", missing], "no such directory"),
        (["ladder", missing, "--grid", "0"], "expected positive numbers"),
        (["ladder-dynamics", "steps=0"], "steps: must be an integer >= 1"),
        (["ladder-dynamics", "theorem.K=7"], "theorem.K"),
        (["race", "--only", "nope"], "is not a race configuration"),
        (["race", "steps=0"], "steps: must be an integer >= 1"),
        (["sweep", "train.steps=-1"], "train.steps = -1"),
        (["sweep", "--config", str(bad)], "is not valid TOML"),
        (["grid", "--config", "configs/explore_generalization.toml", "train.lr=-1"], "train.lr"),
        (["grid", "--config", str(bad)], "is not valid TOML"),
        (["claims", "--config", "configs/population_smoke.toml", "train.lr=-1"], "train.lr"),
        (["claims", "--config", "configs/population_smoke.toml", "--jobs", "0"], "--jobs 0"),
        (["reproduce", "train.steps=-1"], "train.steps = -1"),
        (["reproduce", "--config", str(bad)], "is not valid TOML"),
        (["graph-ladder", "--variants", "nope"], "--variants nope"),
        (["graph-mechanism", missing], "no such directory"),
        (["graph-mechanism", missing, "--n", "0"], "--n 0"),
        (["pool-interventions", missing, "--out", missing], "no interventions.json"),
        (["recount", missing], "no claims.json"),
        (["at-step", missing, "--step", "10", "--out", missing], "no such directory"),
        (["trivial-rules", "task.p=1"], "task.p"),
        (["repair", missing], "no such directory"),
        (["unlock", missing], "no such directory"),
    ]


def test_every_command_answers_a_bad_argument_before_importing_torch(tmp_path):
    todo = cases(tmp_path)
    assert {argv[0] for argv, _ in todo} >= set(COMMANDS)  # every command has a case
    out = subprocess.run(
        [sys.executable, "-c", RUN_CASES],
        input=json.dumps([argv for argv, _ in todo]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout.splitlines()[-1])
    assert len(results) == len(todo)
    for (argv, expected), got in zip(todo, results, strict=True):
        lines = got["stderr"].strip().splitlines()
        assert got["rc"] == 2, (argv, got)
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, got["stderr"])
        assert expected in lines[0], (argv, lines[0])
        assert not got["torch"], f"{' '.join(argv)}: torch was imported before the error"


def test_configs_validate_without_torch():
    """The config dataclasses, their validation and the sweep and grid configs import and
    load without torch (empirical.model.config builds its torch tables on first use)."""
    code = (
        "import sys\n"
        "from empirical.runs.config import load_run_config\n"
        "from empirical.experiments.sweep.spec import load_grid_config\n"
        "from empirical.experiments.sweep.spec import load_sweep_config\n"
        "cfg = load_run_config('configs/authors.toml', ['train.steps=10'])\n"
        "load_grid_config('configs/explore_generalization.toml')\n"
        "load_sweep_config('configs/sweep_pairs.toml')\n"
        "print(cfg.train.steps, cfg.built_model_config().d_vocab, 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    steps, d_vocab, torch_imported = out.stdout.split()
    assert (steps, torch_imported) == ("10", "False") and int(d_vocab) > 0


def test_model_config_torch_tables_on_use():
    import torch

    from empirical.model import config

    assert [config.torch_dtype(n) for n in config.DTYPE_NAMES] == [torch.float32, torch.float64]
    assert [config.dtype_name(torch.float64), config.dtype_name(torch.int64)] == ["float64", None]
    assert config.activation("quadratic") is torch.square
    assert config.ModelConfig(dtype="float64").torch_dtype is torch.float64
