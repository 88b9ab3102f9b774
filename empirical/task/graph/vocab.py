"""`GraphVocabulary`: the token ids and text of computational-graph sequences, and their
reading (every node's value and depth) from the ids (docs/graph.md, "One sequence").

    vocab = GraphVocabulary(p=23, K=64, L=380)
    vocab.decode(ids)      # '7 -> x12; 20 -> x3; x12 + x3 -> x40;'
    vocab.encode(text)     # ids (L,), pads after the last clause
    vocab.nodes(ids)       # [Node(position, name, value, depth, ...)] in definition order

Ids: 0..p-1 the values, p..p+K-1 the names x0..x{K-1}, then `->`, `;`, `+`, `-`, `*`, `pad`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from disentangled.errors import UserError
from empirical.task.graph.config import OPERATIONS
from empirical.task.vocab import tokens_text

MARKS = ("->", ";", *OPERATIONS, "pad")


class GraphTokenizeError(UserError, ValueError):
    """Text or token ids that are not a graph sequence; the message says where."""


def apply(op: str, a: int, b: int, p: int) -> int:
    """a op b mod p."""
    if op == "+":
        return (a + b) % p
    if op == "-":
        return (a - b) % p
    return (a * b) % p


@dataclass(frozen=True)
class Node:
    """One clause: the name it defines at `position` (the node's target position), its
    value and depth; a leaf's literal, or the operand names and operations between them."""

    position: int
    name: int
    value: int
    depth: int
    literal: int | None = None
    operands: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()


class GraphVocabulary:
    """Token ids of graph sequences with modulus p, K names and length L (module docstring)."""

    def __init__(self, p: int, K: int, L: int):
        self.p, self.K, self.L = p, K, L
        self.n_classes = p
        self.arrow, self.sep = p + K, p + K + 1
        self.op_ids = {op: p + K + 2 + i for i, op in enumerate(OPERATIONS)}
        self.pad = p + K + 2 + len(OPERATIONS)
        self.d_vocab = self.pad + 1
        self.names = [str(v) for v in range(p)] + [f"x{i}" for i in range(K)] + list(MARKS)
        self._ids = {name: i for i, name in enumerate(self.names)}

    def __repr__(self) -> str:
        return f"GraphVocabulary(p={self.p}, K={self.K}, L={self.L})"

    def is_name(self, t: int) -> bool:
        return self.p <= t < self.p + self.K

    # ------------------------------------------------------------------ ids -> nodes
    def clauses(self, ids) -> list[tuple[int, list[int]]]:
        """[(first position, tokens)] of each clause (`;` dropped) up to the pads."""
        seq = [int(t) for t in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
        out, start, current = [], 0, []
        for pos, t in enumerate(seq):
            if not 0 <= t < self.d_vocab:
                raise GraphTokenizeError(f"position {pos}: id {t} is outside 0..{self.d_vocab - 1}")
            if t == self.pad:
                if current:
                    raise GraphTokenizeError(f"position {pos}: `pad` inside a clause")
                if any(u != self.pad for u in seq[pos:]):
                    raise GraphTokenizeError(f"position {pos}: a clause after the pads")
                break
            if t == self.sep:
                out.append((start, current))
                start, current = pos + 1, []
            else:
                current.append(t)
        if current:
            raise GraphTokenizeError("the last clause has no `;`")
        return out

    def nodes(self, ids) -> list[Node]:
        """Every node of one sequence, in definition order, with its value and depth; a
        GraphTokenizeError names a clause that is not `v -> x` or `x op x ... -> x`, a name
        used before its definition or defined twice."""
        defined: dict[int, Node] = {}
        out = []
        for start, toks in self.clauses(ids):
            if len(toks) < 3 or toks[-2] != self.arrow or not self.is_name(toks[-1]):
                raise GraphTokenizeError(f"position {start}: expected a clause `... -> x`")
            name, body = toks[-1], toks[:-2]
            if name in defined:
                raise GraphTokenizeError(f"position {start}: {self.names[name]} defined twice")
            position = start + len(toks) - 1
            if len(body) == 1 and body[0] < self.p:
                node = Node(position, name, body[0], 0, literal=body[0])
            else:
                node = self._computed(start, body, defined, position, name)
            defined[name] = node
            out.append(node)
        return out

    def _computed(self, start, body, defined, position, name) -> Node:
        operands, ops = body[0::2], body[1::2]
        op_of = {i: op for op, i in self.op_ids.items()}
        if not all(t in defined for t in operands) or not all(t in op_of for t in ops):
            raise GraphTokenizeError(
                f"position {start}: expected earlier names joined by operations (+, -, *)"
            )
        if len(operands) != len(ops) + 1:
            raise GraphTokenizeError(f"position {start}: a clause may not end in an operation")
        value = defined[operands[0]].value
        for op, t in zip(ops, operands[1:], strict=True):
            value = apply(op_of[op], value, defined[t].value, self.p)
        depth = 1 + max(defined[t].depth for t in operands)
        names = tuple(t - self.p for t in operands)
        return Node(position, name, value, depth, None, names, tuple(op_of[o] for o in ops))

    def label(self, ids) -> int:
        """The last node's value (the row's `labels` entry)."""
        return self.nodes(ids)[-1].value

    def targets(self, ids) -> tuple[torch.Tensor, torch.Tensor]:
        """(targets, target depths), each (L,): a node's value and depth at its position."""
        seq = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        targets = torch.full((len(seq),), -1, dtype=torch.long)
        depths = torch.full((len(seq),), -1, dtype=torch.long)
        for node in self.nodes(seq):
            targets[node.position], depths[node.position] = node.value, node.depth
        return targets, depths

    # ------------------------------------------------------------------ text
    def label_text(self, label: int) -> str:
        return str(int(label))

    def targets_text(self, ids, targets) -> str:
        """`x12=7 x3=20 x40=4`: each node's name and label, in definition order."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        targets = targets.tolist() if isinstance(targets, torch.Tensor) else list(targets)
        return " ".join(f"{self.names[ids[i]]}={t}" for i, t in enumerate(targets) if t >= 0)

    def decode(self, ids):
        """`7 -> x12; 20 -> x3; x12 + x3 -> x40;` of one sequence; a list for (n, L)."""
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            return [self.decode(row) for row in ids.cpu()]
        parts = [" ".join(self.names[t] for t in toks) + ";" for _, toks in self.clauses(ids)]
        return " ".join(parts)

    def decode_tokens(self, ids):
        return tokens_text(self.names, self.d_vocab, ids, GraphTokenizeError)

    def encode(self, text: str, check: bool = True) -> torch.Tensor:
        """`7 -> x12; x12 * x12 -> x3;` (or the `decode_tokens` form) -> ids (L,)."""
        words = text.replace(";", " ; ").split()
        ids = []
        for w in words:
            if w not in self._ids:
                raise GraphTokenizeError(f"{w!r} is not a token (values 0..{self.p - 1}, names "
                                         f"x0..x{self.K - 1}, {', '.join(MARKS)})")  # fmt: skip
            ids.append(self._ids[w])
        while ids and ids[-1] == self.pad:
            ids.pop()
        if ids and ids[-1] != self.sep:
            raise GraphTokenizeError("the last clause has no `;`")
        if len(ids) > self.L:
            raise GraphTokenizeError(f"{len(ids)} tokens do not fit L = {self.L}")
        out = torch.tensor(ids + [self.pad] * (self.L - len(ids)), dtype=torch.long)
        if check:
            self.nodes(out)
        return out
