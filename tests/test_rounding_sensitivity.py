"""benchmarks/rounding_sensitivity.py at a toy size: both optimizer variants train, the table
names both, the fused one lands elsewhere (other rounding), and the engine's AdamW factory is
the default again afterwards."""

import importlib.util
from pathlib import Path

import pytest

import empirical.train.learners as learners

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "rounding_sensitivity.py"


def load_script():
    spec = importlib.util.spec_from_file_location("rounding_sensitivity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # two short trainings, ~10 s: a benchmark's own check
def test_default_and_fused_rows_and_the_factory_restored(capsys):
    script = load_script()
    before = learners._adamw
    assert script.main(["--steps", "20", "--threads", "1", "task.eval_size=100"]) == 0
    assert learners._adamw is before
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    default = next(r for r in rows if r.startswith("| default |"))
    fused = next(r for r in rows if r.startswith("| fused |"))
    assert default.rstrip(" |").endswith("-")
    assert float(fused.split("|")[-2]) > 0  # other rounding: other weights after 20 steps
