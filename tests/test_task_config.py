"""TaskConfig: defaults, loading with overrides, and an error for every impossible setting."""

from __future__ import annotations

import dataclasses

import pytest

from empirical.config.io import ConfigError, load_config, save_config
from empirical.task.config import TaskConfig, task_config


def test_defaults():
    cfg = task_config()
    assert (cfg.p, cfg.K, cfg.L, cfg.min_assignments, cfg.max_assignments) == (97, 5, 16, 1, 4)
    assert cfg.r1 == ("d",) and cfg.r2 == ("b",)
    assert cfg.allow_same_variable_operands is True
    assert cfg.eval_size == 10_000
    assert cfg.frac_0var == pytest.approx(1 / 3)
    assert cfg.frac_2var == pytest.approx(1 / 3)
    assert cfg.n_pairs == 97 * 98 // 2 and cfg.n_held_out == 475
    assert cfg.allowed_vars(0) == [0, 1, 2, 4] and cfg.allowed_vars(1) == [0, 2, 3, 4]


def test_mix_fields():
    cfg = task_config(frac_1var=0.2, ratio_2var_to_0var=3.0)
    assert (cfg.frac_0var, cfg.frac_2var) == pytest.approx((0.2, 0.6))
    cfg = task_config(ratio_2var_to_0var=float("inf"))
    assert (cfg.frac_0var, cfg.frac_2var) == pytest.approx((0.0, 2 / 3))
    cfg = task_config(ratio_2var_to_0var=0.0, frac_1var=0.0)
    assert (cfg.frac_0var, cfg.frac_2var) == (1.0, 0.0)


def test_load_with_overrides_and_file(tmp_path):
    cfg = load_config(TaskConfig, None, ["p=11", "r1=a,c", "r2=[]", "eval_size=2_000"])
    assert (cfg.p, cfg.r1, cfg.r2, cfg.eval_size) == (11, ("a", "c"), (), 2000)
    path = tmp_path / "task.toml"
    save_config(cfg, path)
    assert load_config(TaskConfig, path) == cfg
    with pytest.raises(ConfigError, match="task.K"):
        load_config(TaskConfig, None, ["K=30"])
    # r1/r2 are normalized to sorted unique letters
    assert task_config(r1=["e", "d", "e"]).r1 == ("d", "e")


IMPOSSIBLE = [
    (dict(p=1), "task.p = 1 is out of range: must be an integer [2, 4096]"),
    (dict(p=5000), "task.p"),
    (dict(K=27), "task.K = 27 is out of range: must be an integer [1, 26]"),
    (dict(K=0), "task.K"),
    (dict(L=7), "task.L = 7 is out of range"),
    (dict(min_assignments=0), "task.min_assignments = 0 is out of range"),
    (dict(min_assignments=3, max_assignments=2), "task.min_assignments = 3 > task.max_assignments"),
    (dict(L=12, max_assignments=5), "task.max_assignments = 5 does not fit the layout"),
    (dict(L=20, max_assignments=6, K=5), "task.max_assignments = 6 exceeds the K = 5"),
    (dict(K=3, r1=(), r2=(), max_assignments=4), "exceeds the K = 3"),
    (dict(held_out_fraction=1.0), "task.held_out_fraction = 1.0 must lie in [0, 1)"),
    (dict(held_out_fraction=-0.1), "task.held_out_fraction"),
    (dict(p=2, held_out_fraction=0.9), "leaving none for training"),
    (dict(frac_1var=1.5), "task.frac_1var = 1.5 must lie in [0, 1]"),
    (dict(frac_1var=-0.1), "task.frac_1var"),
    (dict(frac_1var=float("nan")), "task.frac_1var"),
    (dict(ratio_2var_to_0var=-1.0), "task.ratio_2var_to_0var = -1.0 must lie in [0, inf]"),
    (dict(r1=("f",)), "task.r1: 'f' is not a variable; with K = 5"),
    (dict(r2=("B",)), "task.r2: 'B' is not a variable"),
    (dict(K=3, max_assignments=3, r1=("a",), r2=("d",)), "task.r2: 'd' is not a variable"),
    (dict(r1=("a", "b", "c", "d", "e")), "task.r1 = ['a', 'b', 'c', 'd', 'e'] forbids all K = 5"),
    (dict(K=2, max_assignments=2, r1=(), r2=("a", "b")), "task.r2 = ['a', 'b'] forbids all K = 2"),
    (dict(eval_size=0), "task.eval_size = 0 is out of range"),
    (dict(allow_same_variable_operands="yes"), "task.allow_same_variable_operands"),
    (dict(p=2.5), "task.p"),
    (
        dict(K=2, max_assignments=2, r1=("a",), r2=("a",), allow_same_variable_operands=False),
        "no 2-var sequence can be trained",
    ),
    (
        dict(max_assignments=1, allow_same_variable_operands=False),
        "task.allow_same_variable_operands = false, task.max_assignments = 1",
    ),
]


@pytest.mark.parametrize("kwargs, message", IMPOSSIBLE)
def test_impossible_settings_raise_config_error(kwargs, message):
    with pytest.raises(ConfigError) as info:
        task_config(**kwargs)
    assert message in str(info.value)


def test_edge_settings_that_are_allowed():
    task_config(p=2, K=1, L=8, r1=(), r2=(), max_assignments=1)  # smallest task
    task_config(K=26, L=56, max_assignments=26, r1=(), r2=())
    task_config(held_out_fraction=0.0)
    task_config(max_assignments=1)  # 2-var sequences then use one variable twice (`c+c`)
    cfg = task_config(K=2, max_assignments=2, r1=("a",), r2=("a",))  # only `b+b` as 2-var
    assert cfg.training_2var_combos() == [(1, 1)]


def test_errors_surface_through_the_config_loader():
    @dataclasses.dataclass
    class Run:
        seed: int = 0
        task: TaskConfig = dataclasses.field(default_factory=task_config)

    with pytest.raises(ConfigError, match="task.max_assignments"):
        load_config(Run, None, ["task.max_assignments=7"])
