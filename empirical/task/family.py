"""`Family`: what a task family offers behind one interface (docs/task.md, "Task families"),
and the field declarations the families' task configs share.

A family is one package under empirical/task/ whose torch-free `__init__` defines
`FAMILY`, an instance of a `Family` subclass: its task config class (`config`, in the
package's `config.py`: the fields it reads, validated on construction), vocabulary and
layout, held-out data, training sampler and evaluation sets, the names figures and the
summary use. The data methods import their modules (torch) when called: the registry and
the configs import no torch, so that a bad config is answered at once. What a family adds on
top (analyses, commands) is in empirical/studies/<family>/ (empirical.studies lists them).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from empirical.config.field_types import integer
from empirical.config.io import ConfigError

__all__ = [
    "LETTERS", "EvalSize", "Family", "PhaseSets", "Variables", "check_hop_counts", "kept_hops",
    "same_value",
]  # fmt: skip

LETTERS = string.ascii_lowercase  # the variables' names, a..z
# the field types several families declare (each family's config lists the fields it reads)
Variables = integer(1, len(LETTERS), why=" (one letter a..z per variable)")  # task.K
EvalSize = integer(1)  # task.eval_size: sequences per evaluation set (or its whole support)


@dataclass(frozen=True)
class PhaseSets:
    """The sets the phase detector (empirical.runs.phases) reads: the 0-var series (its
    learning ends phase 1), the series whose rise is the first spike, and the series whose
    rise is the second. The paper's by default."""

    zero: tuple[str, ...] = ("0var/ind",)
    variable: tuple[str, ...] = ("1var/ind", "1var/pair", "2var/ind", "2var/pair")
    restricted: tuple[str, ...] = ("1var/var", "1var/both", "2var/var", "2var/both")


def same_value(value: Any, default: Any) -> bool:
    """Whether a config value equals a default (a list equals the same tuple)."""
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return tuple(value) == tuple(default)
    return value == default


def check_hop_counts(name: str, values, lo: int, meaning: str) -> tuple[int, ...]:
    """`values` as a tuple of distinct hop counts (integers >= lo); else a ConfigError naming
    task.<name>, `meaning` saying what the smallest ones are."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(
                f"task.{name}: {v!r} is not a hop count; hop counts are integers >= {lo} "
                f"({meaning})"
            )
    if len(set(values)) != len(values):
        raise ConfigError(f"task.{name} = {list(values)} repeats a hop count; list each once")
    return tuple(values)


def kept_hops(hops, weights, held_out) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The hop counts not in `held_out`, with their relative weights (equal if none given)."""
    weights = weights or (1.0,) * len(hops)
    kept = [(h, w) for h, w in zip(hops, weights, strict=True) if h not in held_out]
    return tuple(h for h, _ in kept), tuple(w for _, w in kept)


class Family:
    """A task family. Subclasses set the class attributes and implement the data methods; the
    defaults here suit a family that holds nothing out and has no analyses or commands."""

    name: str = ""
    title: str = ""  # the task's name in figure titles
    config: type  # its task config class (the fields it reads; `family` names it)
    set_prefixes: tuple[str, ...] = ()  # its set names start with one of these
    panel_titles: dict[str, str] = {}
    phase_sets: PhaseSets = PhaseSets()

    def __repr__(self) -> str:
        return f"<task family {self.name!r}>"

    # -- data ---------------------------------------------------------------------------------
    def vocabulary(self, task):
        """The tokenizer (`d_vocab`, `n_classes`, `L`, `encode`, `decode`, `decode_tokens`,
        `label`, `label_text`)."""
        raise NotImplementedError

    def layout(self, task) -> tuple[int, int, int]:
        """(values, variables, length) of the token layout: ids 0..values-1 are the values
        (the output classes), then the variables, then three marks; `length` tokens."""
        raise NotImplementedError

    def held_out(self, task, seed: int):
        """What training never shows, as held-out value pairs (n, 2); none by default."""
        import torch

        return torch.zeros((0, 2), dtype=torch.long)

    def training_sampler(self, task, held_out, device="cpu"):
        """The training sampler: `.sample(n, generator) -> Batch`."""
        raise NotImplementedError

    def eval_set_names(self, task) -> tuple[str, ...]:
        raise NotImplementedError

    def sample_set_names(self, task) -> tuple[str, ...]:
        """The set names `sample --split` accepts (default: the config's sets)."""
        return self.eval_set_names(task)

    def split_help(self) -> str:
        """What `sample --help` says of the family's --split names ("": nothing)."""
        return ""

    def build_eval_set(self, task, seed: int, name: str, held_out):
        """One evaluation set on the CPU: (Batch, whether it is the whole support), or None
        if it cannot exist for the config; a KeyError names an unknown set."""
        raise NotImplementedError

    # -- names --------------------------------------------------------------------------------
    def owns_set(self, name: str) -> bool:
        return name.startswith(self.set_prefixes)

    def set_label(self, name: str) -> str | None:
        """The set's plain-language name (None: none)."""
        return None

    def panel(self, name: str) -> str:
        """The Figure 2 panel a set is drawn in (its key; titled by panel_titles)."""
        return name.partition("/")[0]
