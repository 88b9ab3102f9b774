"""The lego family: LEGO's chains with signs (Zhang et al.), e.g. `a=+1, c=+b, b=-a, c=? -1`
(docs/lego.md). Its task config `LegoTask` (K, L, eval_size and the `lego_*` fields) is in
`config.py`; the vocabulary, sampler and evaluation sets `lego/h{H}`, `lego/unshuffled` in
`draw.py`; its association attention and `analyze` on a lego run are
empirical/studies/lego/. No torch on import.
"""

from __future__ import annotations

from empirical.task.family import Family, PhaseSets
from empirical.task.lego.config import LegoTask

__all__ = ["FAMILY", "Lego"]


class Lego(Family):
    """Chains of signed clauses over {+1, -1}, shuffled; the query asks one variable's sign."""

    name = "lego"
    title = "LEGO chains"
    config = LegoTask
    set_prefixes = ("lego/",)
    panel_titles = {"lego": "LEGO: by the query's hop count"}
    phase_sets = PhaseSets(zero=("lego/h0",), variable=("lego/h1", "lego/h2"),
                           restricted=("lego/h3",))  # fmt: skip

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
