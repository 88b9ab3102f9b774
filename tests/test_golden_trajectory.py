"""The first 300 steps of our seed 0 of configs/authors.toml against the stored trajectory
(tests/golden/authors_seed0_300.json; tests/golden_trajectory.py says how it is made).

On the CPU kind that wrote it the trajectory must be identical (training is bit-deterministic
there); on another kind, float rounding differs, so it must agree to 1e-3 in the training loss
and 1% in every accuracy (a 1e-4 change of the learning rate already moves the step-300 loss by
3e-3). A failure means the trajectory changed: if on purpose, rewrite the golden file and
regenerate the "ours" numbers of README.md and paper_checks.md (docs/training.md, "Golden
trajectory")."""

from __future__ import annotations

import json
import math

import pytest
from golden_trajectory import GOLDEN, trajectory

from empirical.train.summary import cpu_model


@pytest.mark.slow
def test_the_first_300_steps_of_seed_0_follow_the_golden_trajectory(tmp_path):
    golden = json.loads(GOLDEN.read_text())
    same_cpu = golden["cpu"] == cpu_model()
    rel, acc_tol = (0.0, 0.0) if same_cpu else (1e-3, 0.01)
    got = trajectory(tmp_path)
    assert [r["step"] for r in got] == [r["step"] for r in golden["records"]]
    how = (
        f"(golden from commit {golden['commit']} on {golden['cpu']}; this CPU: {cpu_model()}). "
        "If the change is on purpose: python tests/golden_trajectory.py --write, and regenerate "
        "the 'ours' numbers of README.md and paper_checks.md"
    )
    for mine, ref in zip(got, golden["records"], strict=True):
        if ref["train_loss"] is None:
            assert mine["train_loss"] is None
        else:
            assert math.isclose(mine["train_loss"], ref["train_loss"], rel_tol=rel, abs_tol=0), (
                f"step {ref['step']}: training loss {mine['train_loss']!r} != "
                f"{ref['train_loss']!r} " + how
            )
        assert mine["acc"].keys() == ref["acc"].keys()
        worst = max(ref["acc"], key=lambda k: abs(mine["acc"][k] - ref["acc"][k]))
        assert abs(mine["acc"][worst] - ref["acc"][worst]) <= acc_tol, (
            f"step {ref['step']}: {worst} {mine['acc'][worst]} != {ref['acc'][worst]} " + how
        )
