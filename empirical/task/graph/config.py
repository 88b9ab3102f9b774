"""`GraphTask`: the graph family's task config (docs/graph.md): p, K, L and eval_size of the
paper's fields, which it shares (K here counts variable names x0.., up to 4096), and the
`graph_*` fields, validated on construction. Errors are ConfigErrors naming the field. No
torch here.
"""

from __future__ import annotations

from typing import Any, Literal

from empirical.config.field_types import Flag, integer, names, number
from empirical.config.io import ConfigError, config_class
from empirical.task.family import EvalSize

__all__ = ["OPERATIONS", "GraphTask", "clause_width", "sequence_length"]

OPERATIONS = ("+", "-", "*")  # mod p; `*` is multiplication (the seed's `x`)


def clause_width(max_operands: int) -> int:
    """Tokens of the longest clause: operands and operations, `->`, the name, `;`."""
    return 2 * max_operands + 2


def sequence_length(nodes: int, max_operands: int) -> int:
    """Tokens of the longest sequence of `nodes` nodes (the first is a leaf: 4 tokens)."""
    return 4 + (nodes - 1) * clause_width(max_operands)


@config_class("task")
class GraphTask:
    """Arithmetic mod p on a random computational graph, every node's value a target
    (docs/graph.md)."""

    p: integer(2, 4096) = 23  # modulus; values 0..p-1
    K: integer(2, 4096, why=" (variable names x0..)") = 64  # names, drawn per sequence
    L: integer(4) = 380  # the model's context: the longest evaluated sequence must fit
    eval_size: EvalSize = 1000  # graphs per evaluation set
    family: Literal["graph"] = "graph"
    graph_min_nodes: integer(2, why=" (a graph has a leaf and a node computed from it)") = 2
    graph_max_nodes: integer(2) = 12  # training draws N uniform on min..max
    graph_eval_nodes: names("node counts (integers >= 2)", Any) = (6, 12, 24, 48)
    graph_operations: names("operations (+, -, *)") = OPERATIONS
    graph_max_operands: integer(1, 3) = 3  # an internal node: min..this earlier nodes
    graph_min_operands: integer(1, 3) = 1  # (the seed's min_fan_in_deg; 2: no copies)
    graph_leading_leaves: integer(1, why=" (node 0 is a leaf)") = 1  # the seed: 6 of 32
    graph_leaf_share: number(0, 1, hi_open=True,
                             message="must be a number in [0, 1) (the odds that a node after the "
                             "leading leaves is a leaf)") = 0.25  # fmt: skip
    graph_shift: Flag = True  # training rows start at a random position (docs/graph.md)

    # fields a saved config.toml holds only when they differ from their default (added after
    # runs were saved: their config.toml files stay byte for byte as they were)
    __omit_default__ = ("graph_min_operands", "graph_leading_leaves")

    def __post_init__(self) -> None:
        _check_nodes(self)
        _check_operations(self)
        _check_fit(self)

    @property
    def n_classes(self) -> int:
        """The model's output classes: the values 0..p-1."""
        return self.p

    @property
    def train_length(self) -> int:
        """Tokens of a training row: the longest sequence of graph_max_nodes nodes."""
        return sequence_length(self.graph_max_nodes, self.graph_max_operands)


def _check_nodes(task: GraphTask) -> None:
    if task.graph_max_nodes < task.graph_min_nodes:
        raise ConfigError(
            f"task.graph_max_nodes = {task.graph_max_nodes} is below task.graph_min_nodes = "
            f"{task.graph_min_nodes}: training draws N uniform on min..max"
        )
    counts = task.graph_eval_nodes
    if not counts:
        raise ConfigError("task.graph_eval_nodes is empty: give at least one node count")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ConfigError(
                f"task.graph_eval_nodes: {n!r} is not a node count; node counts are integers "
                ">= 2 (a leaf and a node computed from it)"
            )
    if len(set(counts)) != len(counts):
        raise ConfigError(f"task.graph_eval_nodes = {list(counts)} repeats a node count")
    fewest = min(task.graph_min_nodes, *counts)
    if task.graph_leading_leaves >= fewest:
        raise ConfigError(
            f"task.graph_leading_leaves = {task.graph_leading_leaves} leaves no computed node "
            f"in a graph of {fewest} nodes (task.graph_min_nodes, task.graph_eval_nodes): it "
            f"must be below {fewest}"
        )
    task.graph_eval_nodes = tuple(sorted(counts))


def _check_operations(task: GraphTask) -> None:
    if task.graph_min_operands > task.graph_max_operands:
        raise ConfigError(
            f"task.graph_min_operands = {task.graph_min_operands} is above "
            f"task.graph_max_operands = {task.graph_max_operands}: a computed node draws its "
            "operand count uniform on min..max"
        )
    ops = task.graph_operations
    for op in ops:
        if op not in OPERATIONS:
            raise ConfigError(
                f"task.graph_operations: {op!r} is not an operation of the graph family; "
                f"allowed: {', '.join(repr(o) for o in OPERATIONS)} (mod p; '*' multiplies)"
            )
    if not ops or len(set(ops)) != len(ops):
        raise ConfigError(
            f"task.graph_operations = {list(ops)} must list one or more distinct operations "
            f"of {', '.join(repr(o) for o in OPERATIONS)}"
        )
    task.graph_operations = tuple(o for o in OPERATIONS if o in ops)  # a fixed order


def _check_fit(task: GraphTask) -> None:
    """Every node gets its own name, and every evaluated sequence fits the context."""
    most = max(task.graph_max_nodes, *task.graph_eval_nodes)
    if most > task.K:
        raise ConfigError(
            f"task.K = {task.K} variable names are too few: a graph of {most} nodes "
            f"(task.graph_max_nodes, task.graph_eval_nodes) names each node once; raise "
            f"task.K to {most} or ask fewer nodes"
        )
    need = sequence_length(most, task.graph_max_operands)
    if task.L < need:
        raise ConfigError(
            f"task.L = {task.L} is too short: a graph of {most} nodes with up to "
            f"{task.graph_max_operands} operands a node takes up to {need} tokens; set "
            f"task.L >= {need}"
        )
