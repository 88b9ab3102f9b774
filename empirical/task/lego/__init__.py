"""The lego family: LEGO's chains with signs (Zhang et al.), e.g. `a=+1, c=+b, b=-a, c=? -1`
(docs/lego.md). The `lego_*` task fields and their validation are here; the vocabulary,
sampler and evaluation sets `lego/h{H}`, `lego/unshuffled` in `draw.py`; its association
attention and `analyze` on a lego run are empirical/studies/lego/. It reads K, L and
eval_size of the paper's task fields, no other. No torch on import.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from empirical.config.field_types import choice, integer, names, number
from empirical.config.io import ConfigError
from empirical.task.family import Family, PhaseSets, check_hop_counts, require_defaults

__all__ = ["FAMILY", "Lego", "LegoFields"]

ORDERS = ("random", "chain")
READS = ("family", "K", "L", "eval_size")  # the paper's task fields the family reads


@dataclass
class LegoFields:
    """The lego family's task fields (TaskConfig collects them; docs/lego.md)."""

    lego_hops: names("hop counts (integers >= 0)", Any) = (0, 1, 2)  # in training (root: 0)
    lego_hop_weights: names("numbers >= 0", Any) = ()  # their relative weights (empty: equal)
    lego_held_out_hops: names("hop counts (integers >= 0)", Any) = (3,)  # only evaluated
    lego_chain_length: integer(1) = 4  # clauses of the queried chain (> every hop count)
    lego_distractors: integer(0, why=" (the most distractor chains per sequence)") = 1
    # distractor chains per sequence: uniform on 0..this
    lego_distractor_length: integer(1, why=" (the most clauses of one)") = 4
    # clauses of a distractor chain: uniform on 1..this
    lego_order: choice(*ORDERS) = "random"  # "random": shuffled | "chain": chain after chain
    lego_minus_share: number(0, 1, lo_open=True, hi_open=True,
                             message="must be a number in (0, 1) (the odds of a `-` sign in "
                             "training; 0.5: uniform)") = 0.5  # fmt: skip
    # odds of a `-` sign in training (evaluation: 0.5)


def _check_values(task) -> None:
    """Each lego field on its own."""
    meaning = "0: the root `a=+1` is queried, 1: a variable bound to the root, ..."
    for name in ("lego_hops", "lego_held_out_hops"):
        setattr(task, name, check_hop_counts(name, getattr(task, name), 0, meaning))
    trained = [h for h in task.lego_hops if h not in task.lego_held_out_hops]
    if not trained:
        raise ConfigError(
            f"task.lego_held_out_hops = {list(task.lego_held_out_hops)} holds out every hop "
            f"count of task.lego_hops = {list(task.lego_hops)}, leaving nothing to train"
        )
    weights = task.lego_hop_weights
    if not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
        for w in weights
    ):
        raise ConfigError(
            f"task.lego_hop_weights = {weights!r} must be a list of finite numbers >= 0"
        )
    if weights and len(weights) != len(task.lego_hops):
        raise ConfigError(
            f"task.lego_hop_weights = {list(weights)} has {len(weights)} weights for the "
            f"{len(task.lego_hops)} hop counts of task.lego_hops: give one per hop count (or "
            "none: equal weights)"
        )
    task.lego_hop_weights = tuple(float(w) for w in weights)
    if weights and not sum(w for h, w in zip(task.lego_hops, weights, strict=True)
                           if h in trained) > 0:  # fmt: skip
        raise ConfigError(
            f"task.lego_hop_weights = {list(weights)} gives weight 0 to every trained hop "
            f"count {trained}; give one of them a weight > 0"
        )


def _check_fit(task) -> None:
    """The fields together: the queried chain holds every evaluated hop count, and every
    clause fits the K variables and the L positions."""
    deepest = max((*task.lego_hops, *task.lego_held_out_hops))
    length = task.lego_chain_length
    if isinstance(length, bool) or not isinstance(length, int) or length < deepest + 1:
        raise ConfigError(
            f"task.lego_chain_length = {length!r} is out of range: must be an integer >= "
            f"{deepest + 1} (the queried chain must hold the deepest hop count {deepest}: a hop "
            "count H needs H + 1 clauses)"
        )
    clauses = task.lego_chain_length + task.lego_distractors * task.lego_distractor_length
    if clauses > task.K:
        raise ConfigError(
            f"task.K = {task.K} variables are too few: a sequence holds up to {clauses} "
            f"clauses (task.lego_chain_length + task.lego_distractors * "
            f"task.lego_distractor_length), each defining its own variable; raise task.K to "
            f"{clauses} or ask fewer clauses"
        )
    if task.L < clauses + 1:
        raise ConfigError(
            f"task.L = {task.L} is too short: {clauses} clauses and the query, a token each, "
            f"need L >= {clauses + 1}"
        )


class Lego(Family):
    """Chains of signed clauses over {+1, -1}, shuffled; the query asks one variable's sign."""

    name = "lego"
    title = "LEGO chains"
    fields = LegoFields
    set_prefixes = ("lego/",)
    panel_titles = {"lego": "LEGO: by the query's hop count"}
    phase_sets = PhaseSets(zero=("lego/h0",), variable=("lego/h1", "lego/h2"),
                           restricted=("lego/h3",))  # fmt: skip

    def validate(self, task) -> None:
        from empirical.task.config import PaperTask

        require_defaults(
            task,
            {f.name: f.default for f in dataclasses.fields(PaperTask) if f.name not in READS},
            f"is not read by the lego family (task.family = {task.family!r}): leave it unset",
        )
        _check_values(task)
        _check_fit(task)

    def vocabulary(self, task):
        from empirical.task.lego.draw import LegoVocabulary

        return LegoVocabulary(task.K, task.L)

    def layout(self, task) -> tuple[int, int, int]:
        """The values +1, -1 (ids 0, 1), the K queries and 2K(K+1) clauses, the length."""
        return 2, task.K + 2 * task.K * (task.K + 1) - 2, task.L

    def training_sampler(self, task, held_out, device="cpu"):
        from empirical.task.lego.draw import LegoSampler

        return LegoSampler(task, device)

    def eval_set_names(self, task) -> tuple[str, ...]:
        from empirical.task.lego.draw import eval_set_names

        return eval_set_names(task)

    def split_help(self) -> str:
        return "with task.family=lego: lego/h0, lego/h1, ..., lego/unshuffled"

    def build_eval_set(self, task, seed: int, name: str, held_out):
        from empirical.task.lego.draw import build_eval_set

        return build_eval_set(task, seed, name)

    def set_label(self, name: str) -> str | None:
        split = name.partition("/")[2]
        if split == "unshuffled":
            return "lego: clauses in chain order (trained hop counts)"
        hops = split.removeprefix("h")
        if split.startswith("h") and hops.isdigit():
            return f"lego: the query {hops} hop{'s' if hops != '1' else ''} from its root"
        return None

    def panel(self, name: str) -> str:
        return "lego"


FAMILY = Lego()
