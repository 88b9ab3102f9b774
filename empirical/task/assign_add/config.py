"""`AssignAddTask`: the assign_add family's task config, the paper's task (docs/task.md,
"Configuration"), validated on construction. Each field's own check is its declared type; the
checks across fields are below. Errors are ConfigErrors naming `task.<name>`; no torch here.
The chain family's config extends it (empirical/task/chain/config.py).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Literal

from empirical.config.field_types import MUST, Flag, choice, integer, names, number, text
from empirical.config.io import ConfigError, config_class
from empirical.task.family import LETTERS, EvalSize, Variables

__all__ = ["EVAL_SET_NAMES", "EXTRA_EVAL_SET_NAMES", "AssignAddTask", "train_pair_ranks"]

MAX_P = 4096
HELD_OUT_FORMS = ("unordered", "ordered")
PAIR_SPLITS = ("seeded", "python_random")
MIXES = ("fractions", "rows")
ASSIGNMENT_COUNTS = ("uniform", "clamped")
PADDINGS = ("layouts", "gaps")
# the evaluation sets (eval_sets.py builds them), and the optional ones (task.extra_eval_sets)
EVAL_SET_NAMES = (
    "0var/ind", "0var/pair",
    "1var/ind", "1var/pair", "1var/var", "1var/both",
    "2var/ind", "2var/pair", "2var/var", "2var/both",
    "curated/novel_orderings", "curated/held_out_pairs",
)  # fmt: skip
EXTRA_EVAL_SET_NAMES = ("fig3/2var_union", "fig3/0var_held_out")


def fraction(message: str, hi_open: bool = False):
    """A share in [0, 1] (or [0, 1)): "must be a number", then `message` out of range."""
    return number(0, 1, hi_open=hi_open, message=message, type_message="must be a number")


@config_class("task")
class AssignAddTask:
    """The assign-and-add task (paper Section 3); (ours) marks a reconstructed default."""

    p: integer(2, MAX_P) = 97  # modulus; numbers 0..p-1 (ours)
    K: Variables = 5  # variables (ours)
    L: integer(8, why=" (4 positions for `+`, two operands and `=`, 4 for assignments)") = 16
    # sequence length (paper): assignments in 0..L-5, `+` L-4, operands, `=` L-1
    min_assignments: integer(1) = 1  # assigned variables per sequence, at least (ours)
    max_assignments: integer(1, wording=MUST) = 4  # ... at most (ours)
    frac_1var: fraction("must lie in [0, 1]") = 1 / 3  # share of 1-var sequences (ours)
    ratio_2var_to_0var: number(0, None, finite=False, message="must lie in [0, inf]",
                               type_message="must be a number") = 1.0  # fmt: skip
    # 2-var : 0-var ratio of the rest (paper's "priming")
    held_out_fraction: fraction("must lie in [0, 1)", hi_open=True) = 0.1  # of the value pairs
    # r1 / r2: never the first / second operand in training (ours: the spec's reading
    # r1 = (d, e), r2 = (b, e) leaves e never an operand; docs/training_search.md)
    r1: names("variable letters") = ("d",)
    r2: names("variable letters") = ("b",)
    allow_same_variable_operands: Flag = True  # 2-var sequences like `c+c` (ours)
    eval_size: EvalSize = 10_000  # sequences per evaluation set (or its whole support)
    # --- how the held-out pairs are chosen (defaults: ours; configs/authors.toml: theirs)
    held_out_form: choice(*HELD_OUT_FORMS) = "unordered"  # or "ordered" (the authors')
    pair_split: choice(*PAIR_SPLITS) = "seeded"  # or "python_random" (the authors')
    pair_seed: integer(0, why=" (or none: the run seed)") | None = None  # python_random's
    train_pairs_file: text("must be a path (a string; empty: no file)") = ""  # JSON list of
    # the ordered training pairs (the rest held out)
    # --- training mix and sequence layout
    mix: choice(*MIXES) = "fractions"  # or "rows": the authors' uniform draw over rows
    two_var_frequency: number(0, 1, message="must be a number in [0, 1] (the fraction of 2-var "
                              "rows kept)") = 1.0  # fmt: skip
    assignment_count: choice(*ASSIGNMENT_COUNTS) = "uniform"  # or "clamped" (the authors')
    padding: choice(*PADDINGS) = "layouts"  # or "gaps" (the authors')
    extra_eval_sets: names("set names, from: " + ", ".join(EXTRA_EVAL_SET_NAMES)) = ()
    train_pair_fraction: number(0, 1, lo_open=True, message="must be a number in (0, 1] (or "
                                "unset: 1 - task.held_out_fraction)") | None = None  # fmt: skip
    # the authors' TRAIN_PAIRS_FRAC, given directly (None: 1 - held_out_fraction)
    family: Literal["assign_add"] = "assign_add"  # the task family (empirical.task.registry)

    def __post_init__(self) -> None:
        """The fields together (each on its own is checked by its type): normalise them, or
        a ConfigError naming one."""
        _check_sizes(self)
        _check_choices(self)
        _check_fractions(self)
        _check_variables(self)
        if self.mix == "rows":
            # frac_1var and ratio_2var_to_0var are not used by this mix; they are set to its
            # effective shares so that frac_0var / frac_1var / frac_2var print the real mix
            w0, w1a, w1b, w2 = self.training_group_weights
            self.frac_1var = (w1a + w1b) / (w0 + w1a + w1b + w2)
            self.ratio_2var_to_0var = w2 / w0

    # ------------------------------------------------------------------ derived values
    @property
    def training_group_weights(self) -> tuple[float, float, float, float]:
        """Relative training weights of 0-var, 1-var (variable first), 1-var (variable
        second) and 2-var sequences: for mix = "fractions" frac_0var, frac_1var / 2 twice,
        frac_2var; for mix = "rows" the authors' row counts per training pair (K, the
        variables allowed first, those allowed second, (K - |r1|) * two_var_frequency;
        docs/task.md derives them)."""
        if self.mix == "rows":
            return (
                float(self.K),
                float(len(self.allowed_vars(0))),
                float(len(self.allowed_vars(1))),
                float(self.K - len(self.r1)) * self.two_var_frequency,
            )
        half = self.frac_1var / 2
        return (self.frac_0var, half, half, self.frac_2var)

    @property
    def mix_weights(self) -> tuple[float, float, float]:
        """Effective shares of 0-, 1- and 2-var training sequences, for either mix."""
        w0, w1a, w1b, w2 = self.training_group_weights
        total = w0 + w1a + w1b + w2
        return (w0 / total, (w1a + w1b) / total, w2 / total)

    @property
    def n_classes(self) -> int:
        """The model's output classes: the numbers 0..p-1."""
        return self.p

    @property
    def letters(self) -> str:
        return LETTERS[: self.K]

    @property
    def region(self) -> int:
        """Number of assignment positions, 0..L-5."""
        return self.L - 4

    @property
    def frac_0var(self) -> float:
        """Share of 0-var training sequences (for mix = "rows" its effective share)."""
        if self.mix == "rows":
            return self.mix_weights[0]
        rest = 1.0 - self.frac_1var
        if math.isinf(self.ratio_2var_to_0var):
            return 0.0
        return rest / (1.0 + self.ratio_2var_to_0var)

    @property
    def frac_2var(self) -> float:
        """Share of 2-var training sequences (for mix = "rows" its effective share)."""
        if self.mix == "rows":
            return self.mix_weights[2]
        return 1.0 - self.frac_1var - self.frac_0var

    @property
    def n_pairs(self) -> int:
        """Value pairs the held-out set is drawn from: unordered {x, y}, x <= y, x == y
        included (p(p+1)/2) for held_out_form = "unordered", ordered (x, y) (p*p) else."""
        if self.held_out_form == "ordered":
            return self.p * self.p
        return self.p * (self.p + 1) // 2

    @property
    def n_train_ordered(self) -> int:
        """floor(f * p * p), f = train_pair_fraction, else 1 - held_out_fraction: training
        pairs of an ordered split by fraction (evaluated in the authors' order,
        floor(0.7 * 59 * 59) = 2436)."""
        f = self.train_pair_fraction
        if f is None:
            f = 1.0 - self.held_out_fraction
        return int(math.floor(f * self.p * self.p))

    @property
    def n_held_out(self) -> int:
        """Held-out pairs (counted as in n_pairs): unordered, held_out_fraction * n_pairs
        rounded half up; ordered, p*p minus n_train_ordered (the authors' count) or, with
        train_pairs_file, minus the pairs the file lists (reads the file)."""
        if self.held_out_form == "ordered":
            if self.train_pairs_file:
                return self.p * self.p - len(train_pair_ranks(self))
            return self.p * self.p - self.n_train_ordered
        return int(math.floor(self.held_out_fraction * self.n_pairs + 0.5))

    def var_index(self, letter: str) -> int:
        return self.letters.index(letter)

    def allowed_vars(self, position: int) -> list[int]:
        """Variables allowed at operand `position` (0 = first, 1 = second) in training."""
        banned = self.r1 if position == 0 else self.r2
        return [i for i, v in enumerate(self.letters) if v not in banned]

    def restricted_vars(self, position: int) -> list[int]:
        banned = self.r1 if position == 0 else self.r2
        return [i for i, v in enumerate(self.letters) if v in banned]

    def two_var_ok(self, v1: int, v2: int) -> bool:
        """Whether (v1, v2) may be a 2-var operand pair at all (ignoring R1/R2)."""
        if v1 == v2:
            return self.allow_same_variable_operands
        return self.max_assignments >= 2

    def training_2var_combos(self) -> list[tuple[int, int]]:
        return [
            (a, b)
            for a in self.allowed_vars(0)
            for b in self.allowed_vars(1)
            if self.two_var_ok(a, b)
        ]


# -- the checks across fields ----------------------------------------------------------------
def _check_sizes(cfg: AssignAddTask) -> None:
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


def _check_choices(cfg: AssignAddTask) -> None:
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


def _check_fractions(cfg: AssignAddTask) -> None:
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


def _check_variables(cfg: AssignAddTask) -> None:
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


# -- task.train_pairs_file -------------------------------------------------------------------
_TRAIN_FILES: dict[tuple, tuple[int, ...]] = {}


def train_pair_ranks(cfg: AssignAddTask) -> tuple[int, ...]:
    """Sorted ranks n1*p + n2 of the ordered training pairs listed in cfg.train_pairs_file:
    JSON, a list of [n1, n2] or an object holding it under "train_pairs" (and "p", if present,
    equal to task.p); parsed once per (path, mtime, size, p). A ConfigError names the file."""
    path, p = os.path.abspath(cfg.train_pairs_file), cfg.p
    where = f"task.train_pairs_file = {cfg.train_pairs_file!r} ({path})"
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size, p)
        if key in _TRAIN_FILES:
            return _TRAIN_FILES[key]
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc})") from None
    if isinstance(data, dict):
        if "train_pairs" not in data:
            raise ConfigError(
                f'{where}: a JSON object must hold the list of pairs under "train_pairs"'
            )
        if "p" in data and data["p"] != p:
            raise ConfigError(f"{where}: the file is for p = {data['p']!r}, but task.p = {p}")
        data = data["train_pairs"]
    if not isinstance(data, list):
        raise ConfigError(
            f'{where}: expected a list of [n1, n2] pairs (or an object with "train_pairs"), '
            f"got {type(data).__name__}"
        )
    if not data:
        raise ConfigError(f"{where}: lists no pair, which leaves no training pair")
    for i, pair in enumerate(data):
        shaped = isinstance(pair, list) and len(pair) == 2
        if not (shaped and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)):
            raise ConfigError(f"{where}: entry {i} is {pair!r}, not a pair [n1, n2] of integers")
        if not (0 <= pair[0] < p and 0 <= pair[1] < p):
            raise ConfigError(
                f"{where}: entry {i} {pair!r} is out of range: numbers must lie in "
                f"0..{p - 1} (task.p = {p})"
            )
    counts = Counter(x * p + y for x, y in data)
    repeated = [rank for rank, n in counts.items() if n > 1]
    if repeated:
        raise ConfigError(
            f"{where}: lists [{min(repeated) // p}, {min(repeated) % p}] "
            f"{max(counts.values())} times; each training pair must appear once"
        )
    if len(_TRAIN_FILES) >= 16:
        _TRAIN_FILES.pop(next(iter(_TRAIN_FILES)))
    _TRAIN_FILES[key] = tuple(sorted(counts))
    return _TRAIN_FILES[key]
