"""Validation of the paper's task fields (TaskConfig's own: p, K, L, the assignments, the
held-out value pairs, the mix and layout), which the assign_add family reads and the chain
family reads too. Errors are ConfigErrors naming the field as `task.<name>` and the allowed
range; a bad field is answered before torch is imported (this module imports none).
"""

from __future__ import annotations

import math
import string

from empirical.config_io import ConfigError

LETTERS = string.ascii_lowercase
MAX_P = 4096
HELD_OUT_FORMS = ("unordered", "ordered")
PAIR_SPLITS = ("seeded", "python_random")
MIXES = ("fractions", "rows")
ASSIGNMENT_COUNTS = ("uniform", "clamped")
PADDINGS = ("layouts", "gaps")
# optional evaluation sets (task.extra_eval_sets), built exactly; see eval_sets.py
EXTRA_EVAL_SET_NAMES = ("fig3/2var_union", "fig3/0var_held_out")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def need_int(cfg, name: str, lo: int, hi: int | None, why: str = "") -> int:
    """cfg.<name>, an integer in [lo, hi] (hi None: no upper bound); a ConfigError else."""
    value = getattr(cfg, name)
    rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
    if not _is_int(value) or value < lo or (hi is not None and value > hi):
        raise ConfigError(
            f"task.{name} = {value!r} is out of range: must be an integer {rng}{why}"
        )
    return value


def need_choice(cfg, name: str, allowed: tuple[str, ...]) -> str:
    """cfg.<name>, one of `allowed`; a ConfigError listing them else."""
    value = getattr(cfg, name)
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(
            f"task.{name} = {value!r} is not allowed: must be one of "
            + ", ".join(f"{a!r}" for a in allowed)
        )
    return value


def validate_paper_fields(cfg) -> None:
    """Check and normalise the paper's task fields of `cfg` (ConfigError naming one)."""
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
    need_int(cfg, "p", 2, MAX_P)
    K = need_int(cfg, "K", 1, len(LETTERS), " (one letter a..z per variable)")
    L = need_int(
        cfg, "L", 8, None, " (4 positions for `+`, two operands and `=`, 4 for assignments)"
    )
    region = L - 4
    lo = need_int(cfg, "min_assignments", 1, None)
    hi = cfg.max_assignments
    if not _is_int(hi) or hi < 1:
        raise ConfigError(f"task.max_assignments = {hi!r} must be an integer >= 1")
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
    form = need_choice(cfg, "held_out_form", HELD_OUT_FORMS)
    split = need_choice(cfg, "pair_split", PAIR_SPLITS)
    mix = need_choice(cfg, "mix", MIXES)
    need_choice(cfg, "assignment_count", ASSIGNMENT_COUNTS)
    need_choice(cfg, "padding", PADDINGS)
    if split == "python_random" and form != "ordered":
        raise ConfigError(
            f"task.pair_split = 'python_random' needs task.held_out_form = 'ordered' (the "
            f"authors' rule samples ordered training pairs (n1, n2)); got {form!r}"
        )
    if cfg.pair_seed is not None:
        need_int(cfg, "pair_seed", 0, None, " (or none: the run seed)")
    if not isinstance(cfg.train_pairs_file, str):
        raise ConfigError(
            f"task.train_pairs_file = {cfg.train_pairs_file!r} must be a path (a string; "
            "empty: no file)"
        )
    if cfg.train_pairs_file and form != "ordered":
        raise ConfigError(
            f"task.train_pairs_file = {cfg.train_pairs_file!r} lists ordered training "
            f"pairs, so it needs task.held_out_form = 'ordered'; got {form!r}"
        )
    tvf = cfg.two_var_frequency
    if not _is_number(tvf) or math.isnan(tvf) or not 0.0 <= tvf <= 1.0:
        raise ConfigError(
            f"task.two_var_frequency = {tvf!r} must be a number in [0, 1] (the fraction "
            "of 2-var rows kept)"
        )
    cfg.two_var_frequency = float(tvf)
    if mix == "fractions" and cfg.two_var_frequency != 1.0:
        raise ConfigError(
            f"task.two_var_frequency = {tvf!r} applies only to task.mix = 'rows' and must "
            "be 1.0 with task.mix = 'fractions': use task.ratio_2var_to_0var to set the "
            "2-var share there"
        )
    extra = cfg.extra_eval_sets
    if isinstance(extra, str):
        extra = [v.strip() for v in extra.split(",") if v.strip()]
    if not isinstance(extra, (list, tuple)):
        raise ConfigError(
            f"task.extra_eval_sets = {extra!r} must be a list of set names, from: "
            + ", ".join(EXTRA_EVAL_SET_NAMES)
        )
    for name in extra:
        if name not in EXTRA_EVAL_SET_NAMES:
            raise ConfigError(
                f"task.extra_eval_sets: {name!r} is not an optional evaluation set; "
                "allowed: " + ", ".join(EXTRA_EVAL_SET_NAMES)
            )
    cfg.extra_eval_sets = tuple(dict.fromkeys(extra))


def _check_fractions(cfg) -> None:
    form, p = cfg.held_out_form, cfg.p
    for name in ("frac_1var", "held_out_fraction", "ratio_2var_to_0var"):
        value = getattr(cfg, name)
        if not _is_number(value) or math.isnan(value):
            raise ConfigError(f"task.{name} = {value!r} must be a number")
        setattr(cfg, name, float(value))
    tpf = cfg.train_pair_fraction
    if tpf is not None:
        if not _is_number(tpf) or math.isnan(tpf) or not 0.0 < tpf <= 1.0:
            raise ConfigError(
                f"task.train_pair_fraction = {tpf!r} must be a number in (0, 1] (or unset: "
                "1 - task.held_out_fraction)"
            )
        if cfg.train_pairs_file:
            raise ConfigError(
                f"task.train_pair_fraction = {tpf!r} and task.train_pairs_file = "
                f"{cfg.train_pairs_file!r}: the file decides the training pairs; set one"
            )
        cfg.train_pair_fraction = float(tpf)
        # it wins over held_out_fraction, which shows the same split
        cfg.held_out_fraction = round(1.0 - cfg.train_pair_fraction, 12)
    if not 0.0 <= cfg.frac_1var <= 1.0:
        raise ConfigError(f"task.frac_1var = {cfg.frac_1var!r} must lie in [0, 1]")
    if not cfg.ratio_2var_to_0var >= 0.0:
        raise ConfigError(
            f"task.ratio_2var_to_0var = {cfg.ratio_2var_to_0var!r} must lie in [0, inf]"
        )
    if not 0.0 <= cfg.held_out_fraction < 1.0:
        raise ConfigError(
            f"task.held_out_fraction = {cfg.held_out_fraction!r} must lie in [0, 1)"
        )
    # (with train_pairs_file the file decides; it is checked when read)
    if not cfg.train_pairs_file and cfg.n_held_out >= cfg.n_pairs:
        raise ConfigError(
            f"task.held_out_fraction = {cfg.held_out_fraction!r} holds out "
            f"{cfg.n_held_out} of the {cfg.n_pairs} {form} value pairs of p = {p}, "
            "leaving none for training; use a smaller fraction"
        )


def _check_variables(cfg) -> None:
    K = cfg.K
    if not isinstance(cfg.allow_same_variable_operands, bool):
        raise ConfigError(
            "task.allow_same_variable_operands = "
            f"{cfg.allow_same_variable_operands!r} must be true or false"
        )
    need_int(cfg, "eval_size", 1, None)

    letters = LETTERS[:K]
    for name in ("r1", "r2"):
        value = getattr(cfg, name)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ConfigError(f"task.{name} = {value!r} must be a list of variable letters")
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
