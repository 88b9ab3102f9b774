"""Computational graphs drawn vectorised (one row of uniforms per sequence), the training
sampler and the evaluation sets `graph/n{N}` (docs/graph.md, "One sequence").

The first graph_leading_leaves nodes are leaves (node 0 alone by default); each later node
is a leaf with odds graph_leaf_share, else computed from
k distinct earlier nodes (k uniform on graph_min_operands..graph_max_operands, at most the
nodes before it), chosen uniformly, joined by operations drawn uniformly from
graph_operations and applied left to right mod p. Leaves' values are uniform on 0..p-1;
names are distinct, uniform among the K. A node's depth: 0 for a leaf, else 1 + its
deepest operand's.
"""

from __future__ import annotations

import torch

from empirical.task.assign_add.design import draw_in_chunks
from empirical.task.batch import Batch
from empirical.task.graph.config import GraphTask, clause_width
from empirical.task.graph.vocab import GraphVocabulary
from empirical.task.pairs import cpu_generator

__all__ = [
    "GraphDraw",
    "GraphSampler",
    "GraphVocabulary",
    "build_eval_set",
    "eval_set_names",
    "set_nodes",
]


def _apply(op_index: torch.Tensor, ops: tuple[str, ...], a: torch.Tensor, b: torch.Tensor,
           p: int) -> torch.Tensor:  # fmt: skip
    """a op b mod p, the operation of each entry given by its index into `ops`."""
    out = torch.zeros_like(a)
    for i, op in enumerate(ops):
        value = a + b if op == "+" else a - b if op == "-" else a * b
        out = torch.where(op_index == i, value % p, out)
    return out


class GraphDraw:
    """Draws graphs of one config on one device: N nodes uniform on (lo, hi), rows `width`
    tokens long (pads after the last clause), each row's first position uniform on
    0..max_offset (0: the natural positions)."""

    def __init__(self, task: GraphTask, lo: int, hi: int, width: int, max_offset: int = 0,
                 device="cpu"):  # fmt: skip
        self.task, self.lo, self.hi, self.width = task, lo, hi, width
        self.max_offset = max_offset
        self.device = torch.device(device)
        self.vocab = GraphVocabulary(task.p, task.K, task.L)
        self.A = task.graph_max_operands
        self.C = clause_width(self.A)
        self.ops = task.graph_operations
        n = hi
        # uniform columns: N, offset, leaf, k, operand keys (n x n), operations, leaf values,
        # name keys
        self.cols = {"N": 1, "offset": 1, "leaf": n, "k": n, "keys": n * n,
                     "ops": n * max(self.A - 1, 1), "values": n, "names": task.K}  # fmt: skip
        self.width_u = sum(self.cols.values())

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        return draw_in_chunks(self._draw, n, self.width_u, self.device, generator)

    def _columns(self, U: torch.Tensor) -> dict[str, torch.Tensor]:
        out, at = {}, 0
        for name, size in self.cols.items():
            out[name] = U[:, at : at + size]
            at += size
        return out

    def _structure(self, u: dict[str, torch.Tensor], n: int):
        """(nodes, leaf, k, operands, ops, literals) of n rows; nodes >= a row's N unused."""
        Nm, A, dev = self.hi, self.A, self.device
        ar = torch.arange(Nm, device=dev)
        nodes = self.lo + (u["N"][:, 0] * (self.hi - self.lo + 1)).long().clamp(
            max=self.hi - self.lo
        )
        leaf = (u["leaf"] < self.task.graph_leaf_share) | (ar < self.task.graph_leading_leaves)
        lo = self.task.graph_min_operands
        k = lo + (u["k"] * (A - lo + 1)).long().clamp(max=A - lo)
        k = torch.minimum(k, ar.expand(n, Nm))
        k = torch.where(leaf, 0, k)
        keys = u["keys"].reshape(n, Nm, Nm)
        keys = torch.where(ar[None, None, :] < ar[None, :, None], keys, 2.0)  # earlier only
        operands = keys.argsort(-1)[:, :, :A]  # (n, Nm, A): the first k are the operands
        ops = (u["ops"].reshape(n, Nm, -1)[:, :, : max(A - 1, 0)] * len(self.ops)).long()
        ops = ops.clamp(max=len(self.ops) - 1)
        literals = (u["values"] * self.task.p).long().clamp(max=self.task.p - 1)
        return nodes, leaf, k, operands, ops, literals

    def _values(self, leaf, k, operands, ops, literals):
        """(values, depths), each (n, Nm), node by node."""
        n, Nm = leaf.shape
        p = self.task.p
        values = torch.zeros_like(literals)
        depths = torch.zeros_like(literals)
        for i in range(Nm):
            idx = operands[:, i, :]  # (n, A)
            got = values.gather(1, idx)
            deep = depths.gather(1, idx)
            v, d = got[:, 0], deep[:, 0]
            for s in range(1, self.A):
                used = s < k[:, i]
                v = torch.where(used, _apply(ops[:, i, s - 1], self.ops, v, got[:, s], p), v)
                d = torch.where(used, torch.maximum(d, deep[:, s]), d)
            values[:, i] = torch.where(leaf[:, i], literals[:, i], v)
            depths[:, i] = torch.where(leaf[:, i], 0, d + 1)
        return values, depths

    def _draw(self, U: torch.Tensor) -> Batch:
        n, Nm, A, C, dev = U.shape[0], self.hi, self.A, self.C, self.device
        u = self._columns(U)
        nodes, leaf, k, operands, ops, literals = self._structure(u, n)
        values, depths = self._values(leaf, k, operands, ops, literals)
        vocab = self.vocab
        names = u["names"].argsort(1)[:, :Nm]  # distinct names, uniform
        tok_names = vocab.p + names
        # each node's clause in a block of C tokens: operands at 0, 2, .., operations between
        col = torch.arange(C, device=dev)
        kk = k[:, :, None]
        slot = (col // 2).clamp(max=A - 1).expand(n, Nm, C)
        operand_tok = tok_names.gather(1, operands.reshape(n, -1)).reshape(n, Nm, A)
        op_ids = torch.tensor([vocab.op_ids[o] for o in self.ops], device=dev)
        op_tok = op_ids[ops] if A > 1 else torch.zeros((n, Nm, 1), dtype=torch.long, device=dev)
        body = torch.where(col % 2 == 0, operand_tok.gather(2, slot),
                           op_tok.gather(2, (slot).clamp(max=op_tok.shape[2] - 1)))  # fmt: skip
        kk = torch.where(kk == 0, 1, kk)  # a leaf's body: its literal, one token
        body = torch.where(leaf[:, :, None] & (col == 0), literals[:, :, None], body)
        length = 2 * kk + 2  # (n, Nm, 1)
        block = torch.where(col == length - 3, vocab.arrow, body)
        block = torch.where(col == length - 2, tok_names[:, :, None], block)
        block = torch.where(col == length - 1, vocab.sep, block)
        used_node = torch.arange(Nm, device=dev)[None, :] < nodes[:, None]  # (n, Nm)
        length = torch.where(used_node, length[:, :, 0], 0)
        start = length.cumsum(1) - length
        pos = start[:, :, None] + col
        keep = used_node[:, :, None] & (col < length[:, :, None])
        W = self.width
        pos = torch.where(keep, pos, W)  # unused entries go to a column cut off below
        tokens = torch.full((n, W + 1), vocab.pad, dtype=torch.long, device=dev)
        tokens.scatter_(1, pos.reshape(n, -1), block.reshape(n, -1))
        where = torch.where(used_node, start + length - 2, W)  # each node's name, right side
        targets = torch.full((n, W + 1), -1, dtype=torch.long, device=dev)
        targets.scatter_(1, where, values)
        target_depths = torch.full((n, W + 1), -1, dtype=torch.long, device=dev)
        target_depths.scatter_(1, where, depths)
        last = (nodes - 1)[:, None]
        label = values.gather(1, last)[:, 0]
        offset = (u["offset"][:, 0] * (self.max_offset + 1)).long().clamp(max=self.max_offset)
        return Batch(
            tokens=tokens[:, :W],
            labels=label,
            n_vars=nodes,
            operand_values=torch.stack([label, depths.gather(1, last)[:, 0]], dim=1),
            value_positions=torch.stack(
                [where.gather(1, last)[:, 0], torch.full_like(label, W - 1)], dim=1
            ),  # fmt: skip
            operand_vars=torch.full((n, 2), -1, dtype=torch.long, device=dev),
            targets=targets[:, :W],
            target_depths=target_depths[:, :W],
            pos_offset=offset,
        )


# ---------------------------------------------------------------------- sets


def eval_set_names(task: GraphTask) -> tuple[str, ...]:
    """`graph/n{N}` for every evaluated node count N, smallest first."""
    return tuple(f"graph/n{n}" for n in task.graph_eval_nodes)


def set_nodes(task: GraphTask, name: str) -> int:
    """The node count of evaluation set `name`; a KeyError names an unknown set."""
    if name not in eval_set_names(task):
        known = ", ".join(eval_set_names(task))
        raise KeyError(f"unknown evaluation set {name!r} for this graph config; known: {known}")
    return int(name.removeprefix("graph/n"))


def build_eval_set(task: GraphTask, seed: int, name: str) -> tuple[Batch, bool]:
    """eval_size graphs of the set's N nodes, L tokens a row at the natural positions, drawn
    on the CPU from the set's own stream of the seed."""
    N = set_nodes(task, name)
    draw = GraphDraw(task, N, N, task.L, 0, "cpu")
    return draw.sample(task.eval_size, cpu_generator(seed, "eval", name)), False


class GraphSampler:
    """The training distribution: N uniform on graph_min_nodes..graph_max_nodes, rows of the
    longest such graph's length, each starting at a position uniform on 0..L-1 and wrapping
    around after L - 1 (graph_shift; else at 0), so that every row of the positional embedding
    is trained equally often."""

    def __init__(self, task: GraphTask, device="cpu"):
        self.task = task
        self.device = torch.device(device)
        shift = task.L - 1 if task.graph_shift else 0
        self.draw = GraphDraw(task, task.graph_min_nodes, task.graph_max_nodes,
                              task.train_length, shift, self.device)  # fmt: skip

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n = {n!r} must be an integer >= 0")
        return self.draw.sample(n, generator)
