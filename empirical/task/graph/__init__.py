"""The graph family: arithmetic mod p on a computational graph, every node's value a target,
e.g. `7 -> x12; 20 -> x3; x12 + x3 -> x40;` with labels `x12=7 x3=20 x40=4` (docs/graph.md;
the seed ../shared/seeds/002_*.txt). Its task config `GraphTask` is in `config.py`; the
tokenizer in `vocab.py`; the sampler and the evaluation sets `graph/n{N}` in `draw.py`
(imported when used: torch). What it adds on top (the ablation ladder, the mechanism per
iteration) is empirical/studies/graph/. No torch on import.
"""

from __future__ import annotations

from empirical.task.family import Family, PhaseSets
from empirical.task.graph.config import GraphTask

__all__ = ["FAMILY", "Graph"]


def _draw():
    """The module that draws graphs (torch), imported on first use."""
    from empirical.task.graph import draw

    return draw


class Graph(Family):
    """Random computational graphs mod p; the labels are every node's value, per position."""

    name = "graph"
    title = "Computational graphs"
    config = GraphTask
    set_prefixes = ("graph/",)
    panel_titles = {"graph": "Graphs: every node's value, by the graph's size N"}
    phase_sets = PhaseSets(zero=(), variable=(), restricted=())

    def vocabulary(self, task):
        return _draw().GraphVocabulary(task.p, task.K, task.L)

    def layout(self, task) -> tuple[int, int, int]:
        """The p values, K names and three of the six marks (`->`, `;`, `+`, `-`, `*`,
        `pad`) as `variables`, the length L: d_vocab = p + K + 6."""
        return task.p, task.K + 3, task.L

    def training_sampler(self, task, held_out, device="cpu"):
        return _draw().GraphSampler(task, device)

    def eval_set_names(self, task) -> tuple[str, ...]:
        return tuple(f"graph/n{n}" for n in task.graph_eval_nodes)

    def split_help(self) -> str:
        return "with task.family=graph: graph/n6, graph/n12, ... (one per task.graph_eval_nodes)"

    def build_eval_set(self, task, seed: int, name: str, held_out):
        return _draw().build_eval_set(task, seed, name)

    def set_label(self, name: str) -> str | None:
        count = name.partition("/")[2].removeprefix("n")
        return f"graph: {count} nodes" if count.isdigit() else None

    def panel(self, name: str) -> str:
        return "graph"


FAMILY = Graph()
