"""`TaskConfig`: every knob of the task, validated on construction.

Used on its own or as the `task` field of the run config; errors name the field as
`task.<name>` and the allowed range. The seed is not part of it: functions take `seed`.
docs/task.md has every field, and which defaults are our reconstruction. The fields are the
paper's task (`PaperTask`), `family`, then each registered family's own fields (`chain_*`,
...), collected from the registry (empirical.task.registry): a new family adds its fields without
editing this file. Validation is the family's (`Family.validate`); every other family's
fields must keep their defaults. Importing this module imports no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from empirical.config.field_types import MUST, Flag, choice, integer, names, number, text
from empirical.config.io import config_class
from empirical.task.assign_add.fields import (
    ASSIGNMENT_COUNTS,
    EXTRA_EVAL_SET_NAMES,
    HELD_OUT_FORMS,
    LETTERS,
    MAX_P,
    MIXES,
    PADDINGS,
    PAIR_SPLITS,
)
from empirical.task.family import same_value
from empirical.task.registry import DEFAULT_FAMILY, all_families, family

__all__ = ["EXTRA_EVAL_SET_NAMES", "PaperTask", "TaskConfig"]


@dataclass
class PaperTask:
    """The assign-and-add task (paper Section 3); (ours) marks a reconstructed default."""

    p: integer(2, MAX_P) = 97  # modulus; numbers 0..p-1 (ours)
    K: integer(1, len(LETTERS), why=" (one letter a..z per variable)") = 5  # variables (ours)
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
    eval_size: integer(1) = 10_000  # sequences per evaluation set (or its whole support)
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
    # --- the task family (empirical.task.registry): "assign_add" (the paper's task), "chain", ...
    family: str = DEFAULT_FAMILY  # checked by the registry: a registered family's name


def fraction(message: str, hi_open: bool = False):
    """A share in [0, 1] (or [0, 1)): "must be a number", then `message` out of range."""
    return number(0, 1, hi_open=hi_open, message=message, type_message="must be a number")


_EXTENSIONS = tuple(f.fields for f in reversed(all_families()) if f.fields is not None)


@config_class("task")
class TaskConfig(*_EXTENSIONS, PaperTask):
    """The task: the paper's fields, `family`, and every family's own fields (see above)."""

    def __post_init__(self) -> None:
        chosen = family(self.family)
        chosen.validate(self)
        for other in all_families():
            if other is not chosen:
                other.check_unused(self)

    def config_omitted(self) -> tuple[str, ...]:
        """The fields its TOML leaves out (empirical.config.io.to_dict): the other families' fields
        that keep their defaults (they say nothing; a family added later changes no saved
        config)."""
        chosen = family(self.family)
        return tuple(
            name
            for other in all_families()
            if other is not chosen
            for name, default in other.field_defaults().items()
            if same_value(getattr(self, name), default)
        )

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
        """The model's output classes: the values of the family's token layout (p here)."""
        return family(self.family).n_classes(self)

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
