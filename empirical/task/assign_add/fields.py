"""The paper's task fields together (TaskConfig's own, read by the assign_add and chain
families): the checks across fields (each on its own is checked by its declared type,
empirical/task/config.py). Errors are ConfigErrors naming `task.<name>`; no torch here.
"""

from __future__ import annotations

import string

from empirical.config.io import ConfigError

LETTERS = string.ascii_lowercase
MAX_P = 4096
HELD_OUT_FORMS = ("unordered", "ordered")
PAIR_SPLITS = ("seeded", "python_random")
MIXES = ("fractions", "rows")
ASSIGNMENT_COUNTS = ("uniform", "clamped")
PADDINGS = ("layouts", "gaps")
# optional evaluation sets (task.extra_eval_sets), built exactly; see eval_sets.py
EXTRA_EVAL_SET_NAMES = ("fig3/2var_union", "fig3/0var_held_out")


def validate_paper_fields(cfg) -> None:
    """The paper's task fields together (each on its own is checked by its type, in
    empirical/task/config.py): normalise them and raise a ConfigError naming one."""
    _check_sizes(cfg)
    _check_choices(cfg)
    _check_fractions(cfg)
    _check_variables(cfg)
    if cfg.mix == "rows":
        # frac_1var and ratio_2var_to_0var are not used by this mix; they are set to its
        # effective shares so that frac_0var / frac_1var / frac_2var print the real mix
        w0, w1a, w1b, w2 = cfg.training_group_weights
        cfg.frac_1var = (w1a + w1b) / (w0 + w1a + w1b + w2)
        cfg.ratio_2var_to_0var = w2 / w0


def _check_sizes(cfg) -> None:
    K, region = cfg.K, cfg.L - 4
    lo, hi = cfg.min_assignments, cfg.max_assignments
    if lo > hi:
        raise ConfigError(
            f"task.min_assignments = {lo} > task.max_assignments = {hi}: min must be <= max"
        )
    if 2 * hi > region:
        raise ConfigError(
            f"task.max_assignments = {hi} does not fit the layout: each assignment takes 2 "
            f"of the L-4 = {region} assignment positions, so at most {region // 2} "
            f"(or raise task.L)"
        )
    if hi > K:
        raise ConfigError(
            f"task.max_assignments = {hi} exceeds the K = {K} variables: assigned variables "
            f"are distinct, so it must lie in [task.min_assignments, {K}]"
        )


def _check_choices(cfg) -> None:
    form = cfg.held_out_form
    if cfg.pair_split == "python_random" and form != "ordered":
        raise ConfigError(
            f"task.pair_split = 'python_random' needs task.held_out_form = 'ordered' (the "
            f"authors' rule samples ordered training pairs (n1, n2)); got {form!r}"
        )
    if cfg.train_pairs_file and form != "ordered":
        raise ConfigError(
            f"task.train_pairs_file = {cfg.train_pairs_file!r} lists ordered training "
            f"pairs, so it needs task.held_out_form = 'ordered'; got {form!r}"
        )
    if cfg.mix == "fractions" and cfg.two_var_frequency != 1.0:
        raise ConfigError(
            f"task.two_var_frequency = {cfg.two_var_frequency!r} applies only to task.mix = "
            "'rows' and must be 1.0 with task.mix = 'fractions': use task.ratio_2var_to_0var "
            "to set the 2-var share there"
        )
    for name in cfg.extra_eval_sets:
        if name not in EXTRA_EVAL_SET_NAMES:
            raise ConfigError(
                f"task.extra_eval_sets: {name!r} is not an optional evaluation set; "
                "allowed: " + ", ".join(EXTRA_EVAL_SET_NAMES)
            )
    cfg.extra_eval_sets = tuple(dict.fromkeys(cfg.extra_eval_sets))


def _check_fractions(cfg) -> None:
    tpf = cfg.train_pair_fraction
    if tpf is not None:
        if cfg.train_pairs_file:
            raise ConfigError(
                f"task.train_pair_fraction = {tpf!r} and task.train_pairs_file = "
                f"{cfg.train_pairs_file!r}: the file decides the training pairs; set one"
            )
        # it wins over held_out_fraction, which shows the same split
        cfg.held_out_fraction = round(1.0 - tpf, 12)
    # (with train_pairs_file the file decides; it is checked when read)
    if not cfg.train_pairs_file and cfg.n_held_out >= cfg.n_pairs:
        raise ConfigError(
            f"task.held_out_fraction = {cfg.held_out_fraction!r} holds out "
            f"{cfg.n_held_out} of the {cfg.n_pairs} {cfg.held_out_form} value pairs of "
            f"p = {cfg.p}, leaving none for training; use a smaller fraction"
        )


def _check_variables(cfg) -> None:
    K = cfg.K
    letters = LETTERS[:K]
    for name in ("r1", "r2"):
        value = getattr(cfg, name)
        for v in value:
            if not isinstance(v, str) or v not in letters:
                raise ConfigError(
                    f"task.{name}: {v!r} is not a variable; with K = {K} the variables "
                    f"are {', '.join(letters)}"
                )
        value = tuple(sorted(set(value)))
        if len(value) == K:
            pos = "first (position L-3)" if name == "r1" else "second (position L-2)"
            raise ConfigError(
                f"task.{name} = {list(value)} forbids all K = {K} variables from the {pos} "
                "operand; it must leave at least one variable allowed there (else 1-var "
                "sequences could not put their variable there with equal odds and 2-var "
                "sequences could not be trained)"
            )
        setattr(cfg, name, value)

    if not cfg.training_2var_combos():
        why = []
        if not cfg.allow_same_variable_operands:
            why.append("task.allow_same_variable_operands = false")
        if cfg.max_assignments < 2:
            why.append("task.max_assignments = 1 (two distinct variables need 2)")
        raise ConfigError(
            f"no 2-var sequence can be trained: with task.r1 = {list(cfg.r1)}, "
            f"task.r2 = {list(cfg.r2)}"
            + (", " + ", ".join(why) if why else "")
            + " no (first, second) variable pair is allowed; relax one of these"
        )
