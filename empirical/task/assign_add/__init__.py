"""The assign_add family: the paper's task, `c=1,b=17,a=42,b+19=?` (docs/task.md). Its task
config is `AssignAddTask` (`config.py`); operand designs (`design.py`), draws and sampler
(`draw.py`) and evaluation sets (`eval_sets.py`) are imported when used (torch); its analysis
is the paper's. Importing this package imports no torch.
"""

from __future__ import annotations

from empirical.task.assign_add.config import EVAL_SET_NAMES, EXTRA_EVAL_SET_NAMES, AssignAddTask
from empirical.task.family import Family

__all__ = ["FAMILY", "AssignAdd"]

_SETS = {
    "0var/ind": "0 variables: trained value pairs",
    "0var/pair": "0 variables: held-out value pairs",
    "1var/ind": "1 variable: trained pairs and positions",
    "1var/pair": "1 variable: held-out value pair",
    "1var/var": "1 variable at a position it never held in training",
    "1var/both": "1 variable: held-out pair and untrained position",
    "2var/ind": "2 variables: trained pairs and positions",
    "2var/pair": "2 variables: held-out value pair",
    "2var/var": "2 variables, one at a position it never held in training",
    "2var/both": "2 variables: held-out pair and untrained position",
    "curated/held_out_pairs": "curated: held-out value pairs",
    "curated/novel_orderings": "curated: novel assignment orderings",
}


class AssignAdd(Family):
    """The paper's task (assignments `v=NUMBER`, a sum of two operands)."""

    name = "assign_add"
    title = "Assign-and-add"
    config = AssignAddTask
    set_prefixes = ("0var/", "1var/", "2var/", "curated/", "fig3/")
    panel_titles = {
        "0var": "0 variables (both operands numbers)",
        "1var": "1 variable operand",
        "2var": "2 variable operands",
        "curated": "curated sets",
    }

    def vocabulary(self, task):
        from empirical.task.vocab import Vocabulary

        return Vocabulary(task.p, task.K, task.L)

    def layout(self, task) -> tuple[int, int, int]:
        return task.p, task.K, task.L

    def held_out(self, task, seed: int):
        from empirical.task.pairs import held_out_pairs

        return held_out_pairs(task, seed)

    def training_sampler(self, task, held_out, device="cpu"):
        from empirical.task.assign_add.draw import TrainingSampler

        return TrainingSampler(task, held_out, device)

    def eval_set_names(self, task) -> tuple[str, ...]:
        return EVAL_SET_NAMES + tuple(task.extra_eval_sets)

    def sample_set_names(self, task) -> tuple[str, ...]:
        return EVAL_SET_NAMES + EXTRA_EVAL_SET_NAMES

    def split_help(self) -> str:
        return ", ".join(self.sample_set_names(None))

    def build_eval_set(self, task, seed: int, name: str, held_out):
        from empirical.task.assign_add.eval_sets import build_set

        return build_set(task, seed, name, held_out)

    def set_label(self, name: str) -> str | None:
        return _SETS.get(name)


FAMILY = AssignAdd()
