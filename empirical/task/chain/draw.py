"""The chain family's sequences (`a=17,c=4,b=a,d=b,b+5=?`), drawn vectorised: operand chains
v_1=v_2, ..., v_h=NUMBER and distractor chains, in five steps (operands, hop counts,
distractor chains, variables, order and padding; docs/task.md, "How a chain sequence is
drawn"), as torch ops over the batch; `ChainSampler` is the family's training sampler.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from empirical.task.assign_add.design import (
    V1,
    V2,
    VOFF,
    VSIZE,
    Design,
    block_positions,
    draw_in_chunks,
    make_design,
    training_groups,
    weights_cdf,
)
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import Batch
from empirical.task.chain.config import ChainTask
from empirical.task.pairs import check_held_out


@dataclass
class ChainPlan:
    """What a chain draw asks beyond its operand design: the largest hop counts H with
    their weights, and optionally a held-out pointer target forced after the operand."""

    hops: tuple[int, ...]
    weights: tuple[float, ...]
    other_hops: tuple[int, ...]  # hop counts the other operand of a 2-var row may take (<= H)
    forced_targets: bool = False  # the operand's variable u points to a held-out w (u->w)


class ChainDraw:
    """Draws chain sequences of one config, one operand design and one plan on one device."""

    def __init__(self, cfg: ChainTask, design: Design, plan: ChainPlan, device, strict: bool):
        """strict: the held-out pointer pairs are never drawn (training); else they are
        avoided where an alternative exists (evaluation sets)."""
        self.cfg, self.design, self.plan = cfg, design, plan
        self.device = dev = torch.device(device)
        self.strict = strict
        self.p, self.K, self.L = cfg.p, cfg.K, cfg.L
        self.R = cfg.L - 4
        self.A = cfg.capacity  # slots: most assignments of a sequence
        self.D = cfg.chain_distractors
        self.gaps = cfg.padding == "gaps"
        self.targets_first = cfg.chain_order == "targets_first"
        K, A = self.K, self.A
        self.hop_cdf = weights_cdf(plan.weights, dev)
        self.hops = torch.tensor(plan.hops, dtype=torch.long, device=dev)
        # the other operand's candidates per H: the plan's other hop counts <= H, and H
        cands = [sorted({h for h in plan.other_hops if h <= H} | {H}) for H in plan.hops]
        width = max(len(c) for c in cands)
        self.other_table = torch.tensor(
            [c + [c[-1]] * (width - len(c)) for c in cands], dtype=torch.long, device=dev
        )
        self.other_count = torch.tensor(
            [float(len(c)) for c in cands], dtype=torch.float64, device=dev
        )
        allowed = torch.ones((K + 1, K), dtype=torch.bool)  # row K: no previous variable
        held = torch.zeros((K + 1, K), dtype=torch.bool)
        for u, v in cfg.held_out_pointer_pairs():
            allowed[u, v] = False
            held[u, v] = True
        self.allowed_after = allowed.to(dev)
        self.pointer_rules = bool(held.any())  # held-out pointers: draw slot by slot
        # forced held-out targets per variable u: a padded table and counts
        targets = [[v for v in range(K) if held[u, v]] for u in range(K)]
        tw = max(1, max(len(t) for t in targets))
        self.target_table = torch.tensor(
            [t + [0] * (tw - len(t)) for t in targets], dtype=torch.long, device=dev
        )
        self.target_count = torch.tensor([float(len(t)) for t in targets], device=dev)
        template = torch.full((1, self.L), cfg.p + K + 2, dtype=torch.long)
        template[0, self.L - 4], template[0, self.L - 1] = cfg.p + K, cfg.p + K + 1
        self.template = template.to(dev)
        self.arA = torch.arange(A, device=dev)
        self.arR = torch.arange(self.R, device=dev)
        self.arD = torch.arange(self.D, device=dev)
        self.arK = torch.arange(K, device=dev)
        # uniform columns: config, value, H, side, other hop, count, forced target, D lengths,
        # K variable choices, A order keys, A distractor numbers, R layout keys
        self.width = 7 + self.D + K + 2 * A + self.R

    # ------------------------------------------------------------------ drawing
    def sample(self, n: int, generator: torch.Generator) -> Batch:
        return draw_in_chunks(self._draw, n, self.width, self.device, generator)

    def _draw(self, U: torch.Tensor) -> Batch:
        """One chunk of rows from its uniforms U (n, width): the five steps."""
        s = self._operands(U)
        self._chains(U, s)
        self._variables(U, s)
        return self._tokens(U, s)

    def _operands(self, U: torch.Tensor) -> SimpleNamespace:
        """1. The operand configuration and values of each row."""
        design = self.design
        c = torch.searchsorted(design.cdf, U[:, 0].contiguous(), right=True)  # cdf <= u
        row = design.ltab.index_select(0, c)
        rowf = design.ctab.index_select(0, c)
        vidx = (rowf[:, VOFF] + U[:, 1] * rowf[:, VSIZE]).long()
        values = design.vtab.index_select(0, vidx).long()  # (n, 2) operand values
        v1, v2 = row[:, V1], row[:, V2]
        isv = design.isvar.index_select(0, c)
        same = isv[:, 0] & (v1 == v2)
        two = isv[:, 0] & isv[:, 1] & ~same
        return SimpleNamespace(n=U.shape[0], values=values, v1=v1, v2=v2, isv=isv, same=same,
                               two=two)  # fmt: skip

    def _chains(self, U: torch.Tensor, s: SimpleNamespace) -> None:
        """2-3. The hop counts of the operand chains and the distractor chains: each slot's
        chain, place in it and hop count."""
        A, D, isv = self.A, self.D, s.isv
        # 2. hop counts of the two operand chains (0: no chain)
        hi = torch.searchsorted(self.hop_cdf, U[:, 2].contiguous(), right=True)
        H = self.hops.index_select(0, hi)
        pick = (U[:, 4] * self.other_count.index_select(0, hi)).long()
        other = self.other_table.index_select(0, hi).gather(1, pick[:, None]).squeeze(1)
        first_has_H = U[:, 3] < 0.5
        h1 = torch.where(isv[:, 0], torch.where(s.two & ~first_has_H, other, H), 0)
        h2 = torch.where(isv[:, 1] & ~s.same, torch.where(s.two & first_has_H, other, H), 0)

        # 3. distractor chains, dropped from the first that does not fit
        count = (U[:, 5] * (D + 1)).long()
        dl = 1 + (U[:, 7 : 7 + D] * self.cfg.chain_distractor_length).long()
        dl = torch.where(self.arD < count[:, None], dl, 0)
        fits = (h1 + h2)[:, None] + dl.cumsum(1) <= A
        dl = torch.where(fits.cumprod(1).bool(), dl, 0)
        lens = torch.cat([h1[:, None], h2[:, None], dl], dim=1)  # (n, 2 + D)
        s.ends = ends = lens.cumsum(1)
        starts = ends - lens
        s.n_total = ends[:, -1]
        s.valid = valid = self.arA < s.n_total[:, None]  # (n, A) slots in use
        # chain of each slot (2 + D for an unused slot; clamped where it indexes)
        s.chain_raw = chain_raw = (ends[:, None, :] <= self.arA[None, :, None]).sum(-1)
        s.chain = chain = chain_raw.clamp(max=lens.shape[1] - 1)
        s.k = k = self.arA - starts.gather(1, chain)  # place in its chain (0: head)
        s.hop = torch.where(valid, lens.gather(1, chain) - k, 0)  # hop count of each slot

    def _variables(self, U: torch.Tensor, s: SimpleNamespace) -> None:
        """4. Variables: operand heads (and a forced held-out target) preset, then the rest."""
        K, A, col = self.K, self.A, 7 + self.D
        k, chain_raw, v1, v2, isv = s.k, s.chain_raw, s.v1, s.v2, s.isv
        head = k == 0
        preset = torch.where(
            head & (chain_raw == 0),
            v1[:, None],
            torch.where(head & (chain_raw == 1), v2[:, None], -1),
        )
        if self.plan.forced_targets:
            u = torch.where(isv[:, 0], v1, v2).clamp(min=0)
            t = (U[:, 6] * self.target_count.index_select(0, u)).long()
            forced = self.target_table.index_select(0, u).gather(1, t[:, None])
            preset = torch.where((k == 1) & (chain_raw < 2), forced, preset)
        preset = torch.where(s.valid, preset, K)  # K: an unused slot
        free = s.valid & (preset < 0)  # slots that draw their variable
        used = (preset[:, :, None] == self.arK).any(1)  # (n, K) the preset variables
        if not self.pointer_rules:
            # no held-out pointer: the free slots take the other variables in uniform order
            order = (U[:, col : col + K] + 2.0 * used.double()).argsort(1)
            s.var = torch.where(free, order.gather(1, (free.cumsum(1) - 1).clamp(min=0)), preset)
            return
        # slot by slot (a loop over the slots, not the rows): uniform over the unused
        # variables that are not a held-out target of the chain's previous variable
        s.var = var = preset.clone()
        prev = torch.full((s.n,), K, dtype=torch.long, device=self.device)
        for j in range(A):
            after = torch.where(head[:, j], K, prev)  # a chain's head follows no pointer
            cand = ~used & self.allowed_after.index_select(0, after)
            if not self.strict:
                cand = torch.where(cand.any(1, keepdim=True), cand, ~used)
            nth = (U[:, col + j] * cand.sum(1)).long()
            choice = (cand.cumsum(1) <= nth[:, None]).sum(1)  # the nth candidate
            choice = torch.where(free[:, j], choice, preset[:, j])
            used |= self.arK == choice[:, None]
            var[:, j] = choice
            prev = choice

    def _tokens(self, U: torch.Tensor, s: SimpleNamespace) -> Batch:
        """5. Right-hand sides, the order of the assignments, the tokens and the facts."""
        p, K, L, A, n = self.p, self.K, self.L, self.A, s.n
        col = 7 + self.D + K
        valid, chain, chain_raw, hop = s.valid, s.chain, s.chain_raw, s.hop
        var, values = s.var, s.values
        # right-hand sides: the next variable of the chain, or the chain's number
        nxt = torch.cat([var[:, 1:], var[:, :1]], dim=1)
        dnum = (U[:, col + A : col + 2 * A] * p).long()  # read after the order keys
        number = torch.where(
            chain == 0, values[:, :1], torch.where(chain == 1, values[:, 1:], dnum)
        )
        rhs = torch.where(hop > 1, p + nxt, number)

        # order of the assignments (rank of each slot) and the block positions
        keys = U[:, col : col + A] + 2.0 * (~valid).double()
        col += A
        rank = torch.empty_like(valid, dtype=torch.long)
        rank.scatter_(1, keys.argsort(1), self.arA.expand(n, A))  # rank of each slot
        if self.targets_first:
            # within each chain, hand the chain's ranks out in increasing hop count order
            big = A + 1
            by_rank = (chain_raw * big + rank).argsort(1)
            by_hop = (chain_raw * big + torch.where(valid, hop, rank)).argsort(1)
            rank = torch.empty_like(rank).scatter_(1, by_hop, rank.gather(1, by_rank))
        col += A  # the distractor numbers, read above
        pos = block_positions(s.n_total, U[:, col : col + self.R], self.arA, self.arR, self.gaps)
        start = torch.where(valid, pos, 0).gather(1, rank)  # (n, A) start of each slot's block
        tok = self.template.expand(n, L).contiguous()
        vpos = torch.where(valid, start, L - 3)  # unused slots write into the operands,
        tok.scatter_(1, vpos, p + var.clamp(max=K - 1))
        tok.scatter_(1, torch.where(valid, start + 1, L - 2), rhs)  # overwritten below
        x, y = values[:, 0], values[:, 1]
        isv, v1, v2, ends = s.isv, s.v1, s.v2, s.ends
        tok[:, L - 3] = torch.where(isv[:, 0], p + v1, x)
        tok[:, L - 2] = torch.where(isv[:, 1], p + v2, y)
        # where each operand's number sits: the value token of its chain's last slot
        last1 = (ends[:, 0] - 1).clamp(min=0)
        last2 = torch.where(s.same, ends[:, 0] - 1, ends[:, 1] - 1).clamp(min=0)
        vp1 = torch.where(isv[:, 0], start.gather(1, last1[:, None]).squeeze(1) + 1, L - 3)
        vp2 = torch.where(isv[:, 1], start.gather(1, last2[:, None]).squeeze(1) + 1, L - 2)
        return Batch(
            tokens=tok,
            labels=(x + y) % p,
            n_vars=isv.long().sum(1),
            operand_values=values,
            value_positions=torch.stack([vp1, vp2], dim=1),
            operand_vars=torch.stack([v1, v2], dim=1),
        )


# ---------------------------------------------------------------------- plans
def training_plan(cfg: ChainTask) -> ChainPlan:
    """The training plan: the trained hop counts with their weights."""
    hops, weights = cfg.training_hops
    return ChainPlan(hops=hops, weights=weights, other_hops=hops)


class ChainSampler(TrainingSampler):
    """The training sampler of the chain family (the family's `training_sampler` builds it):
    the assign_add sampler's interface, `sample(n, generator)`, vectorised."""

    def __init__(self, cfg: ChainTask, held_out: torch.Tensor, device="cpu", tables: bool = True):
        """tables: unused (the chain draw has no tables); kept for the common signature."""
        self.cfg = cfg
        self.device = torch.device(device)
        self.held_out = check_held_out(cfg, held_out)
        self.design = make_design(
            cfg, training_groups(cfg), self.held_out, "allowed", self.device, strict=True
        )
        self.draw = ChainDraw(cfg, self.design, training_plan(cfg), self.device, strict=True)

    def _draw(self, n: int, generator: torch.Generator) -> Batch:
        return self.draw.sample(n, generator)
