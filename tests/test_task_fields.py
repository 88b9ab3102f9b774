"""The fields that express the authors' task: defaults, derived values, every ConfigError,
and configs/authors.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from authors_task import AUTHORS

from empirical.config.io import ConfigError, load_config, save_config
from empirical.task.assign_add.config import EXTRA_EVAL_SET_NAMES
from empirical.task.config import TaskConfig, task_config

ROOT = Path(__file__).resolve().parents[1]


def test_new_field_defaults_are_the_old_behaviour():
    cfg = task_config()
    assert cfg.held_out_form == "unordered" and cfg.pair_split == "seeded"
    assert cfg.pair_seed is None and cfg.train_pairs_file == ""
    assert cfg.mix == "fractions" and cfg.two_var_frequency == 1.0
    assert cfg.assignment_count == "uniform" and cfg.padding == "layouts"
    assert cfg.extra_eval_sets == ()
    assert cfg.mix_weights == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert cfg.training_group_weights == pytest.approx((1 / 3, 1 / 6, 1 / 6, 1 / 3))
    assert EXTRA_EVAL_SET_NAMES == ("fig3/2var_union", "fig3/0var_held_out")


def test_rows_mix_weights_of_the_authors_config():
    cfg = task_config(**AUTHORS)
    assert cfg.training_group_weights == (12.0, 10.0, 10.0, 10.0)
    assert cfg.mix_weights == pytest.approx((12 / 42, 20 / 42, 10 / 42), abs=1e-15)
    # the frac_* values print the effective mix, the ignored fields are set to match
    assert (cfg.frac_0var, cfg.frac_1var, cfg.frac_2var) == pytest.approx(
        (12 / 42, 20 / 42, 10 / 42), abs=1e-12
    )
    assert cfg.ratio_2var_to_0var == pytest.approx(10 / 12)
    # frac_1var / ratio_2var_to_0var given with mix = "rows" are ignored, not errors
    other = task_config(**AUTHORS, frac_1var=0.9, ratio_2var_to_0var=5.0)
    assert other == cfg and other.mix_weights == cfg.mix_weights
    # two_var_frequency scales the 2-var rows: (K - |r1|) * f; 0 is allowed (no 2-var)
    half = task_config(**{**AUTHORS, "two_var_frequency": 0.5})
    assert half.training_group_weights == (12.0, 10.0, 10.0, 5.0)
    none = task_config(**{**AUTHORS, "two_var_frequency": 0.0})
    assert none.frac_2var == 0.0 and none.mix_weights[1] == pytest.approx(20 / 32)
    # asymmetric restrictions: 1-var first / second weighted by the allowed variables
    asym = task_config(**{**AUTHORS, "r2": ("a",)})
    assert asym.training_group_weights == (12.0, 10.0, 11.0, 10.0)


def test_ordered_counts():
    cfg = task_config(**AUTHORS)
    assert cfg.n_pairs == 59 * 59 and cfg.n_train_ordered == 2436 and cfg.n_held_out == 1045
    seeded = task_config(p=59, held_out_form="ordered", held_out_fraction=0.3)
    assert seeded.n_held_out == 1045
    assert task_config(p=59, held_out_fraction=0.3).n_held_out == round(0.3 * 59 * 60 / 2)
    assert task_config(held_out_form="ordered", held_out_fraction=0.0).n_held_out == 0


def test_load_with_overrides_and_round_trip(tmp_path):
    cfg = load_config(
        TaskConfig,
        None,
        [
            "p=11",
            "held_out_form=ordered",
            "pair_split=python_random",
            "pair_seed=3",
            "mix=rows",
            "two_var_frequency=0.25",
            "assignment_count=clamped",
            "padding=gaps",
            "extra_eval_sets=fig3/2var_union,fig3/0var_held_out",
        ],
    )
    assert cfg.extra_eval_sets == EXTRA_EVAL_SET_NAMES and cfg.pair_seed == 3
    path = tmp_path / "task.toml"
    save_config(cfg, path)
    assert load_config(TaskConfig, path) == cfg
    assert load_config(TaskConfig, None, ["pair_seed=none"]).pair_seed is None
    # repeated names are kept once, in order
    assert task_config(extra_eval_sets=["fig3/0var_held_out"] * 2).extra_eval_sets == (
        "fig3/0var_held_out",
    )


NEW_ERRORS = [
    (
        dict(held_out_form="both"),
        "task.held_out_form = 'both' is not allowed: must be one of 'unordered', 'ordered'",
    ),
    (dict(held_out_form=1), "task.held_out_form = 1 is not allowed"),
    (
        dict(pair_split="numpy"),
        "task.pair_split = 'numpy' is not allowed: must be one of 'seeded', 'python_random'",
    ),
    (
        dict(pair_split="python_random"),
        "task.pair_split = 'python_random' needs task.held_out_form = 'ordered'",
    ),
    (dict(pair_seed=-1), "task.pair_seed = -1 is out of range: must be an integer >= 0"),
    (dict(pair_seed=1.5), "task.pair_seed = 1.5 is out of range"),
    (dict(pair_seed=True), "task.pair_seed = True is out of range"),
    (dict(train_pairs_file=3), "task.train_pairs_file = 3 must be a path"),
    (
        dict(train_pairs_file="pairs.json"),
        "task.train_pairs_file = 'pairs.json' lists ordered training pairs, so it needs "
        "task.held_out_form = 'ordered'",
    ),
    (dict(mix="thirds"), "task.mix = 'thirds' is not allowed: must be one of 'fractions', 'rows'"),
    (
        dict(mix="rows", two_var_frequency=1.5),
        "task.two_var_frequency = 1.5 must be a number in [0, 1]",
    ),
    (dict(mix="rows", two_var_frequency=-0.1), "task.two_var_frequency = -0.1 must be"),
    (dict(mix="rows", two_var_frequency=float("nan")), "task.two_var_frequency = nan must be"),
    (dict(mix="rows", two_var_frequency="x"), "task.two_var_frequency = 'x' must be"),
    (
        dict(two_var_frequency=0.5),
        "task.two_var_frequency = 0.5 applies only to task.mix = 'rows' and must be 1.0 with "
        "task.mix = 'fractions': use task.ratio_2var_to_0var",
    ),
    (
        dict(assignment_count="clamp"),
        "task.assignment_count = 'clamp' is not allowed: must be one of 'uniform', 'clamped'",
    ),
    (dict(padding="gap"), "task.padding = 'gap' is not allowed: must be one of 'layouts', 'gaps'"),
    (
        dict(extra_eval_sets=("fig3/2var",)),
        "task.extra_eval_sets: 'fig3/2var' is not an optional evaluation set; allowed: "
        "fig3/2var_union, fig3/0var_held_out",
    ),
    (dict(extra_eval_sets=("1var/ind",)), "'1var/ind' is not an optional evaluation set"),
    (dict(extra_eval_sets=5), "task.extra_eval_sets = 5 must be a list of set names"),
    (
        dict(p=2, held_out_form="ordered", held_out_fraction=0.9),
        "task.held_out_fraction = 0.9 holds out 4 of the 4 ordered value pairs of p = 2, "
        "leaving none for training",
    ),
]


@pytest.mark.parametrize("kwargs, message", NEW_ERRORS)
def test_new_fields_raise_config_errors(kwargs, message):
    with pytest.raises(ConfigError) as info:
        task_config(**kwargs)
    assert message in str(info.value)


def test_edge_settings_of_the_new_fields():
    # no 2-var training rows, but the 2-var combos still exist for the evaluation sets
    task_config(**{**AUTHORS, "two_var_frequency": 0.0})
    # the "no 2-var sequence" check is about combos existing, whatever the mix
    with pytest.raises(ConfigError, match="no 2-var sequence can be trained"):
        task_config(
            K=2, max_assignments=2, r1=("a",), r2=("a",), allow_same_variable_operands=False,
            mix="rows", two_var_frequency=0.0,
        )  # fmt: skip
    task_config(held_out_form="ordered", held_out_fraction=0.0, pair_split="python_random")
    task_config(held_out_form="ordered", pair_seed=0)  # pair_seed unused by "seeded": fine
    # with a file, held_out_fraction is not used for the split (the file is read lazily)
    task_config(held_out_form="ordered", train_pairs_file="missing.json", held_out_fraction=0.0)


def test_authors_toml_loads_and_matches_the_documented_run():
    from empirical.runs.config import load_run_config

    cfg = load_run_config(ROOT / "configs" / "authors.toml")
    t = cfg.task
    assert t == task_config(**AUTHORS)
    assert (t.frac_0var, t.frac_1var, t.frac_2var) == pytest.approx((12 / 42, 20 / 42, 10 / 42))
    assert t.n_held_out == 1045 and t.L == 16 and t.eval_size == 10_000
    m, tr = cfg.model, cfg.train
    assert (m.d_model, m.d_mlp, m.d_head, m.init_std, m.dtype) == (128, 512, None, None, "float32")
    assert (tr.steps, tr.batch_size, tr.lr, tr.lr_schedule) == (40_000, 512, 1e-3, "constant")
    assert (tr.weight_decay, tr.betas, tr.warmup_steps) == (0.02, (0.9, 0.999), 0)
    assert (tr.eval_every, tr.checkpoint_every, tr.snapshot_every) == (100, 1000, 500)
    assert cfg.name == "authors" and cfg.seed == 0
    # every value line carries a comment (its source, or "(ours)")
    for line in (ROOT / "configs" / "authors.toml").read_text().splitlines():
        code = line.split("#", 1)[0].strip()
        if "=" in code and not code.startswith("["):
            assert "#" in line, line
