"""LEGO chains drawn vectorised (one row of uniforms per sequence), their vocabulary
(`LegoVocabulary`: a clause is one token, `b=-a`, and so is the query, `c=?`) and the
family's evaluation sets; docs/lego.md, "One sequence", gives the draw and the id layout.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

import torch

from disentangled.errors import UserError
from empirical.task.assign_add.design import draw_in_chunks, weights_cdf
from empirical.task.batch import Batch
from empirical.task.pairs import cpu_generator
from empirical.task.vocab import tokens_text

SIGNS = ("+", "-")
VALUE_TEXT = ("+1", "-1")
_CLAUSE_RE = re.compile(r"\s*([a-z])\s*=\s*([+-])\s*([a-z]|1)\s*")
_QUERY_RE = re.compile(r"\s*([a-z])\s*=\s*\?\s*")


class LegoTokenizeError(UserError, ValueError):
    """Text or token ids that are not a LEGO sequence; the message says where."""


class LegoVocabulary:
    """Token ids of LEGO sequences with K variables and length L: 0, 1 the values +1, -1,
    2..K+1 the queries, then the clauses `v=sx`, then `pad` (docs/lego.md)."""

    def __init__(self, K: int, L: int):
        self.K, self.L = K, L
        self.p = 2  # the values (+1, -1): the model's output classes
        self.n_classes = 2
        self.letters = string.ascii_lowercase[:K]
        self.first_clause = 2 + K
        self.pad = 2 + K + 2 * K * (K + 1)
        self.d_vocab = self.pad + 1
        named = [*self.letters, "1"]
        self.names = [*VALUE_TEXT, *(f"{v}=?" for v in self.letters)]
        self.names += [f"{v}={s}{x}" for v in self.letters for s in SIGNS for x in named]
        self.names.append("pad")

    def __repr__(self) -> str:
        return f"LegoVocabulary(K={self.K}, L={self.L})"

    def clause_id(self, v: int, sign: int, named: int) -> int:
        """The token of clause `v = sign named` (indices; named -1 for the constant 1)."""
        x = self.K if named < 0 else named
        return self.first_clause + (2 * v + sign) * (self.K + 1) + x

    def label_text(self, label: int) -> str:
        return VALUE_TEXT[int(label)]

    # ------------------------------------------------------------------ ids -> structure
    def clauses(self, ids) -> tuple[list[tuple[int, int, int, int]], int]:
        """([(position, variable, sign, named)], query variable) of one sequence; named is
        a variable index or -1 for the constant 1. A LegoTokenizeError for a bad layout."""
        seq = [int(t) for t in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
        L, K = self.L, self.K
        if len(seq) != L:
            raise LegoTokenizeError(f"sequence has {len(seq)} tokens, expected L = {L}")
        if not 2 <= seq[L - 1] < self.first_clause:
            raise LegoTokenizeError(f"position {L - 1}: expected the query `v=?`")
        i = 0
        while i < L - 1 and seq[i] == self.pad:
            i += 1
        out = []
        for pos in range(i, L - 1):
            c = seq[pos] - self.first_clause
            if not 0 <= c < 2 * K * (K + 1):
                raise LegoTokenizeError(f"position {pos}: not a clause `v=sx`")
            vs, x = divmod(c, K + 1)
            out.append((pos, vs // 2, vs % 2, -1 if x == K else x))
        return out, seq[L - 1] - 2

    def resolve(self, ids) -> tuple[int, int]:
        """(value class, hop count) of the query: its sign product down to the root."""
        clauses, q = self.clauses(ids)
        defined = {}
        for pos, v, s, named in clauses:
            if v in defined:
                raise LegoTokenizeError(f"position {pos}: {self.letters[v]!r} defined twice")
            defined[v] = (s, named)
        value, hops, v = 0, -1, q
        while v >= 0:
            if v not in defined:
                raise LegoTokenizeError(f"variable {self.letters[v]!r} is never defined")
            if hops >= len(defined):
                raise LegoTokenizeError("the clauses form a cycle")
            sign, v = defined[v]
            value, hops = value ^ sign, hops + 1
        return value, hops

    def label(self, ids) -> int:
        return self.resolve(ids)[0]

    # ------------------------------------------------------------------ text
    def decode(self, ids):
        """`a=+1, c=+b, b=-a, c=?` of one sequence; a list for (n, L)."""
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            return [self.decode(row) for row in ids.cpu()]
        clauses, q = self.clauses(ids)
        letters = self.letters
        parts = [f"{letters[v]}={SIGNS[s]}{'1' if x < 0 else letters[x]}" for _, v, s, x in clauses]
        return ", ".join([*parts, f"{letters[q]}=?"])

    def decode_tokens(self, ids):
        return tokens_text(self.names, self.d_vocab, ids, LegoTokenizeError)

    def encode(self, text: str, check: bool = True) -> torch.Tensor:
        """`a=+1, b=-a, b=?` (clauses then the query) -> ids (L,), pads first."""
        parts = text.split(",")
        m = _QUERY_RE.fullmatch(parts[-1])
        if m is None or m.group(1) not in self.letters:
            raise LegoTokenizeError(f"{text!r}: expected a query `v=?` last")
        ids = []
        for part in parts[:-1]:
            c = _CLAUSE_RE.fullmatch(part)
            if c is None or any(v not in self.letters + "1" for v in (c.group(1), c.group(3))):
                raise LegoTokenizeError(f"{part.strip()!r}: expected a clause like `b=-a`")
            v, s, x = c.groups()
            named = -1 if x == "1" else self.letters.index(x)
            ids.append(self.clause_id(self.letters.index(v), SIGNS.index(s), named))
        if len(ids) + 1 > self.L:
            raise LegoTokenizeError(f"{len(ids)} clauses do not fit L = {self.L}")
        ids = [self.pad] * (self.L - 1 - len(ids)) + ids
        out = torch.tensor([*ids, 2 + self.letters.index(m.group(1))], dtype=torch.long)
        if check:
            self.resolve(out)
        return out


# ---------------------------------------------------------------------- drawing
@dataclass
class LegoPlan:
    """What one draw asks: the query hop counts with their weights, and the clause order."""

    hops: tuple[int, ...]
    weights: tuple[float, ...]
    order: str = "random"  # "random" | "chain"
    minus_share: float = 0.5  # the odds of a `-` sign (0.5: uniform signs)


class LegoDraw:
    """Draws LEGO sequences of one config and one plan on one device."""

    def __init__(self, cfg, plan: LegoPlan, device="cpu"):
        self.device = dev = torch.device(device)
        self.K, self.L = cfg.K, cfg.L
        self.C = cfg.lego_chain_length
        self.D, self.Ld = cfg.lego_distractors, cfg.lego_distractor_length
        self.S = self.C + self.D * self.Ld  # clauses at most
        self.chain_order = plan.order == "chain"
        self.minus_share = plan.minus_share
        self.hop_cdf = weights_cdf(plan.weights, dev)
        self.hops = torch.tensor(plan.hops, dtype=torch.long, device=dev)
        self.arS = torch.arange(self.S, device=dev)
        self.arD = torch.arange(self.D, device=dev)
        self.pad = 2 + self.K + 2 * self.K * (self.K + 1)
        # uniform columns: hop, count, D lengths, K variable keys, S signs, S order keys,
        # 1 + D chain keys
        self.width = 2 + self.D + self.K + 2 * self.S + 1 + self.D

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        return draw_in_chunks(self._draw, n, self.width, self.device, generator)

    def _draw(self, U: torch.Tensor) -> Batch:
        K, L, S, D = self.K, self.L, self.S, self.D
        n = U.shape[0]
        h = self.hops.index_select(0, torch.searchsorted(self.hop_cdf, U[:, 0].contiguous(),
                                                         right=True))  # fmt: skip
        count = (U[:, 1] * (D + 1)).long()
        col = 2 + D
        dl = 1 + (U[:, 2:col] * self.Ld).long()
        dl = torch.where(self.arD < count[:, None], dl, 0)
        lens = torch.cat([torch.full((n, 1), self.C, device=self.device), dl], dim=1)
        ends = lens.cumsum(1)
        starts = ends - lens
        n_total = ends[:, -1]
        valid = self.arS < n_total[:, None]  # (n, S) slots in use
        chain = (ends[:, None, :] <= self.arS[None, :, None]).sum(-1).clamp(max=D)
        k = self.arS - starts.gather(1, chain)  # place in its chain (0: the root)
        var = U[:, col : col + K].argsort(1)[:, :S]  # distinct variables, uniform
        col += K
        sign = (U[:, col : col + S] < self.minus_share).long()  # 1: `-`
        col += S
        # a clause's value: the sum mod 2 of the signs from its chain's root to it
        signs = torch.where(valid, sign, 0).cumsum(1)
        before = torch.where(starts > 0, signs.gather(1, (starts - 1).clamp(min=0)), 0)
        value = (signs - before.gather(1, chain)) % 2
        prev = torch.cat([var[:, :1], var[:, :-1]], dim=1)
        named = torch.where(k == 0, K, prev)  # K: the constant 1
        clause = 2 + K + (2 * var + sign) * (K + 1) + named
        keys = U[:, col : col + S]
        col += S
        if self.chain_order:
            chain_key = U[:, col : col + 1 + D].argsort(1).argsort(1)  # rank of each chain
            keys = (chain_key.gather(1, chain) * (S + 1) + k).double()
        keys = keys + float((D + 2) * (S + 1)) * (~valid).double()  # unused slots last
        rank = torch.empty_like(var)
        rank.scatter_(1, keys.argsort(1), self.arS.expand(n, S))
        pos = L - 1 - (n_total[:, None] - rank)  # each clause's position
        pos = torch.where(valid, pos, L - 1)  # unused slots write into the query, below
        tok = torch.full((n, L), self.pad, dtype=torch.long, device=self.device)
        tok.scatter_(1, pos, clause)
        q = var.gather(1, h[:, None]).squeeze(1)
        tok[:, L - 1] = 2 + q
        label = value.gather(1, h[:, None]).squeeze(1)
        where = pos.gather(1, h[:, None]).squeeze(1)
        minus = torch.full_like(q, -1)
        return Batch(
            tokens=tok,
            labels=label,
            n_vars=torch.ones_like(q),
            operand_values=torch.stack([label, torch.zeros_like(label)], dim=1),
            value_positions=torch.stack([where, torch.full_like(where, L - 1)], dim=1),
            operand_vars=torch.stack([q, minus], dim=1),
        )


# ---------------------------------------------------------------------- plans and sets

UNSHUFFLED = "lego/unshuffled"


def eval_set_names(cfg) -> tuple[str, ...]:
    """`lego/h{H}` per hop count (trained and held out), then `lego/unshuffled`."""
    return (*(f"lego/h{h}" for h in cfg.evaluated_hops), UNSHUFFLED)


def set_plan(cfg, name: str) -> LegoPlan:
    if name not in eval_set_names(cfg):
        known = ", ".join(eval_set_names(cfg))
        raise KeyError(f"unknown evaluation set {name!r} for this lego config; known: {known}")
    if name == UNSHUFFLED:
        return LegoPlan(*cfg.trained_hops, order="chain")
    return LegoPlan((int(name.removeprefix("lego/h")),), (1.0,), cfg.lego_order)


def build_eval_set(cfg, seed: int, name: str) -> tuple[Batch, bool]:
    """eval_size rows of the set, drawn on the CPU from the set's own stream of the seed."""
    draw = LegoDraw(cfg, set_plan(cfg, name), "cpu")
    return draw.sample(cfg.eval_size, cpu_generator(seed, "eval", name)), False


class LegoSampler:
    """The training distribution of a lego config on one device: `sample(n, generator)`."""

    def __init__(self, cfg, device="cpu"):
        self.cfg = cfg
        self.device = torch.device(device)
        plan = LegoPlan(*cfg.trained_hops, cfg.lego_order, cfg.lego_minus_share)
        self.draw = LegoDraw(cfg, plan, self.device)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n = {n!r} must be an integer >= 0")
        return self.draw.sample(n, generator)
