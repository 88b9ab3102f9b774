"""`TaskConfig`: every knob of the assign-and-add task, validated on construction.

Used on its own or as the `task` field of the run config; errors name the field as
`task.<name>` and the allowed range. The seed is not part of it: functions take `seed`.
See docs/task.md for what each field means and which defaults are our reconstruction.
The defaults are ours; the fields from held_out_form on also express the authors' own run
(configs/authors.toml): ordered held-out pairs, their Python-random pair split or a file of
training pairs, the row-uniform mix, the clamped assignment count and gap padding.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass

from empirical.config_io import ConfigError
from empirical.task.chain_config import FAMILIES, check_chain_defaults, validate_chain

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


@dataclass
class TaskConfig:
    """The assign-and-add task (paper Section 3); (ours) marks a reconstructed default."""

    p: int = 97  # modulus; numbers 0..p-1 (ours)
    K: int = 5  # number of variables, letters a.. (ours)
    L: int = 16  # sequence length (paper): assignments in 0..L-5, `+` L-4, operands, `=` L-1
    min_assignments: int = 1  # assigned variables per sequence, at least (ours)
    max_assignments: int = 4  # ... at most (ours)
    frac_1var: float = 1 / 3  # share of 1-var sequences in training (ours)
    ratio_2var_to_0var: float = 1.0  # 2-var : 0-var ratio of the rest (paper's "priming")
    held_out_fraction: float = 0.1  # fraction of value pairs held out (ours), counted as
    # unordered pairs {x, y} or ordered pairs (x, y) per held_out_form
    # never the first (r1) / second (r2) operand in training. The spec's reading was
    # r1 = (d, e), r2 = (b, e); that makes e never an operand at all, and its var-restricted
    # sets cannot be learned from the data (measured: docs/training_search.md), so the
    # default keeps one variable out of each position, b out of the second as in the paper
    r1: tuple[str, ...] = ("d",)  # never the first operand (position L-3) in training
    r2: tuple[str, ...] = ("b",)  # never the second operand (position L-2) in training
    allow_same_variable_operands: bool = True  # 2-var sequences like `c+c` (ours)
    eval_size: int = 10_000  # sequences per evaluation set (or its whole support if smaller)
    # --- how the held-out pairs are chosen (defaults: ours; configs/authors.toml: theirs)
    held_out_form: str = "unordered"  # "unordered" {x, y} never trained in any order (ours) |
    # "ordered": (x, y) held out while (y, x) may be trained (the authors')
    pair_split: str = "seeded"  # "seeded": from derive_seed(seed, "held_out") (ours) |
    # "python_random": random.Random(pair_seed).sample of the training pairs (the authors')
    pair_seed: int | None = None  # seed of the python_random split (None: the run seed)
    train_pairs_file: str = ""  # JSON list of the ordered training pairs (the rest held out)
    # --- training mix and sequence layout
    mix: str = "fractions"  # "fractions": frac_1var, ratio_2var_to_0var (ours) | "rows": the
    # authors' uniform draw over (variable, type, n1, n2) rows
    two_var_frequency: float = 1.0  # mix = "rows": fraction of 2-var rows kept (the authors')
    assignment_count: str = "uniform"  # "uniform" on [max(min, d), max] (ours) | "clamped":
    # uniform on [min, max], then raised to d (the authors')
    padding: str = "layouts"  # "layouts": uniform over block arrangements (ours) | "gaps":
    # each pad to a uniformly chosen gap (the authors')
    extra_eval_sets: tuple[str, ...] = ()  # optional sets, see EXTRA_EVAL_SET_NAMES
    train_pair_fraction: float | None = None  # fraction of value pairs in training, given
    # directly (the authors' TRAIN_PAIRS_FRAC): sets held_out_fraction = 1 - it, and an
    # ordered split trains exactly floor(train_pair_fraction * p * p) pairs, computed as the
    # authors do (1 - (1 - f) need not round-trip in floating point). None: 1 - held_out_fraction
    # --- the task family (docs/task.md, "The chain family"); the chain_* fields are used and
    # validated only with family = "chain" (chain_config.py) and keep their defaults otherwise
    family: str = "assign_add"  # "assign_add": the paper's task | "chain": multi-hop pointers
    chain_hops: tuple[int, ...] = (1, 2)  # hop counts of the operands in training
    chain_hop_weights: tuple[float, ...] = ()  # their relative weights (empty: equal)
    chain_order: str = "random"  # "random" | "targets_first": every target before its pointer
    chain_distractors: int = 1  # distractor chains per sequence: uniform on 0..this
    chain_distractor_length: int = 1  # assignments of a distractor chain: uniform on 1..this
    chain_held_out_pointers: tuple[str, ...] = ()  # "u->w": the assignment u=w never trained
    chain_held_out_hops: tuple[int, ...] = ()  # operand hop counts never trained (evaluated)

    def __post_init__(self) -> None:
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        def need_int(name: str, lo: int, hi: int | None, why: str = "") -> int:
            value = getattr(self, name)
            rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            if not _is_int(value) or value < lo or (hi is not None and value > hi):
                raise ConfigError(
                    f"task.{name} = {value!r} is out of range: must be an integer {rng}{why}"
                )
            return value

        p = need_int("p", 2, MAX_P)
        K = need_int("K", 1, len(LETTERS), " (one letter a..z per variable)")
        L = need_int(
            "L", 8, None, " (4 positions for `+`, two operands and `=`, 4 for assignments)"
        )
        region = L - 4
        lo = need_int("min_assignments", 1, None)
        hi = self.max_assignments
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

        def need_choice(name: str, allowed: tuple[str, ...]) -> str:
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                raise ConfigError(
                    f"task.{name} = {value!r} is not allowed: must be one of "
                    + ", ".join(f"{a!r}" for a in allowed)
                )
            return value

        need_choice("family", FAMILIES)
        form = need_choice("held_out_form", HELD_OUT_FORMS)
        split = need_choice("pair_split", PAIR_SPLITS)
        mix = need_choice("mix", MIXES)
        need_choice("assignment_count", ASSIGNMENT_COUNTS)
        need_choice("padding", PADDINGS)
        if split == "python_random" and form != "ordered":
            raise ConfigError(
                f"task.pair_split = 'python_random' needs task.held_out_form = 'ordered' (the "
                f"authors' rule samples ordered training pairs (n1, n2)); got {form!r}"
            )
        if self.pair_seed is not None:
            need_int("pair_seed", 0, None, " (or none: the run seed)")
        if not isinstance(self.train_pairs_file, str):
            raise ConfigError(
                f"task.train_pairs_file = {self.train_pairs_file!r} must be a path (a string; "
                "empty: no file)"
            )
        if self.train_pairs_file and form != "ordered":
            raise ConfigError(
                f"task.train_pairs_file = {self.train_pairs_file!r} lists ordered training "
                f"pairs, so it needs task.held_out_form = 'ordered'; got {form!r}"
            )
        tvf = self.two_var_frequency
        if not _is_number(tvf) or math.isnan(tvf) or not 0.0 <= tvf <= 1.0:
            raise ConfigError(
                f"task.two_var_frequency = {tvf!r} must be a number in [0, 1] (the fraction "
                "of 2-var rows kept)"
            )
        self.two_var_frequency = float(tvf)
        if mix == "fractions" and self.two_var_frequency != 1.0:
            raise ConfigError(
                f"task.two_var_frequency = {tvf!r} applies only to task.mix = 'rows' and must "
                "be 1.0 with task.mix = 'fractions': use task.ratio_2var_to_0var to set the "
                "2-var share there"
            )
        extra = self.extra_eval_sets
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
        self.extra_eval_sets = tuple(dict.fromkeys(extra))

        for name in ("frac_1var", "held_out_fraction", "ratio_2var_to_0var"):
            value = getattr(self, name)
            if not _is_number(value) or math.isnan(value):
                raise ConfigError(f"task.{name} = {value!r} must be a number")
            setattr(self, name, float(value))
        tpf = self.train_pair_fraction
        if tpf is not None:
            if not _is_number(tpf) or math.isnan(tpf) or not 0.0 < tpf <= 1.0:
                raise ConfigError(
                    f"task.train_pair_fraction = {tpf!r} must be a number in (0, 1] (or unset: "
                    "1 - task.held_out_fraction)"
                )
            if self.train_pairs_file:
                raise ConfigError(
                    f"task.train_pair_fraction = {tpf!r} and task.train_pairs_file = "
                    f"{self.train_pairs_file!r}: the file decides the training pairs; set one"
                )
            self.train_pair_fraction = float(tpf)
            # it wins over held_out_fraction, which shows the same split
            self.held_out_fraction = round(1.0 - self.train_pair_fraction, 12)
        if not 0.0 <= self.frac_1var <= 1.0:
            raise ConfigError(f"task.frac_1var = {self.frac_1var!r} must lie in [0, 1]")
        if not self.ratio_2var_to_0var >= 0.0:
            raise ConfigError(
                f"task.ratio_2var_to_0var = {self.ratio_2var_to_0var!r} must lie in [0, inf]"
            )
        if not 0.0 <= self.held_out_fraction < 1.0:
            raise ConfigError(
                f"task.held_out_fraction = {self.held_out_fraction!r} must lie in [0, 1)"
            )
        # (with train_pairs_file the file decides; it is checked when read)
        if not self.train_pairs_file and self.n_held_out >= self.n_pairs:
            raise ConfigError(
                f"task.held_out_fraction = {self.held_out_fraction!r} holds out "
                f"{self.n_held_out} of the {self.n_pairs} {form} value pairs of p = {p}, "
                "leaving none for training; use a smaller fraction"
            )

        if not isinstance(self.allow_same_variable_operands, bool):
            raise ConfigError(
                "task.allow_same_variable_operands = "
                f"{self.allow_same_variable_operands!r} must be true or false"
            )
        need_int("eval_size", 1, None)

        letters = LETTERS[:K]
        for name in ("r1", "r2"):
            value = getattr(self, name)
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
            setattr(self, name, value)

        if not self.training_2var_combos():
            why = []
            if not self.allow_same_variable_operands:
                why.append("task.allow_same_variable_operands = false")
            if self.max_assignments < 2:
                why.append("task.max_assignments = 1 (two distinct variables need 2)")
            raise ConfigError(
                f"no 2-var sequence can be trained: with task.r1 = {list(self.r1)}, "
                f"task.r2 = {list(self.r2)}"
                + (", " + ", ".join(why) if why else "")
                + " no (first, second) variable pair is allowed; relax one of these"
            )

        if self.family == "chain":
            validate_chain(self)
        else:
            check_chain_defaults(self)

        if mix == "rows":
            # frac_1var and ratio_2var_to_0var are not used by this mix; they are set to its
            # effective shares so that frac_0var / frac_1var / frac_2var print the real mix
            w0, w1a, w1b, w2 = self.training_group_weights
            self.frac_1var = (w1a + w1b) / (w0 + w1a + w1b + w2)
            self.ratio_2var_to_0var = w2 / w0

    # ------------------------------------------------------------------ derived values
    @property
    def training_group_weights(self) -> tuple[float, float, float, float]:
        """Relative training weights of 0-var, 1-var (variable first), 1-var (variable
        second) and 2-var sequences; each group's weight is split equally over its allowed
        operand configurations.

        mix = "fractions": frac_0var, frac_1var / 2, frac_1var / 2, frac_2var.
        mix = "rows" (the authors' draw, uniform over the (variable, type, n1, n2) rows that
        survive the masks): per training pair (n1, n2), K rows of type 0 (`n1+n2`, one per
        row variable), one type-1 row `v+n2` per variable v allowed first, one type-2 row
        `n1+v` per variable allowed second, and the type-3 rows `v1+v2`: one per row
        variable not in r1 (the authors keep a type-3 row only if its own variable is not in
        r1, hence K - |r1|), times two_var_frequency (the fraction of type-3 rows kept; the
        authors drop a fixed random subset of the rows, we keep every row with that weight
        in expectation). Every training pair has the same rows, so these are also the
        sequence shares.
        """
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
        """Held-out pairs (counted as in n_pairs).

        unordered: held_out_fraction * n_pairs, rounded half up; ordered: p*p minus
        floor((1 - held_out_fraction) * p * p) training pairs (the authors' count); with
        train_pairs_file: p*p minus the pairs the file lists (reads the file).
        """
        if self.held_out_form == "ordered":
            if self.train_pairs_file:
                from empirical.task.pairs import read_train_pairs_file

                return self.p * self.p - int(read_train_pairs_file(self).numel())
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
