"""One run of the dynamics ladder: the theorem's model trained with some constraints released,
one seed, its layer-2 score matrix's updates measured against G1. W_Q = sqrt(d_head) W, W_K = I
(frozen unless `qk_factors`); W_Q trains at `sgd.lr_qk * d_head`, so an SGD step moves W by
exactly -lr_qk dL/dW. Each step draws `batch_size` sequences with replacement by the weights
(0: the whole weighted population) (docs/ladder.md, "The dynamics ladder").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from disentangled.experiments import ebar_block
from disentangled.gradient import cross_entropy_terms
from empirical.bridge.ladder_dynamics.config import DynamicsConfig
from empirical.bridge.ladder_dynamics.restrict import held_out_pairs, restrict
from empirical.bridge.ladder_dynamics.variants import trainable_names, variant_name
from empirical.bridge.theorem_model.construct import build_theorem_model, score_matrix
from empirical.bridge.theorem_model.gradient import model_g1, population_accuracy
from empirical.bridge.theorem_model.layout import Layout
from empirical.bridge.theorem_model.token_population import TokenPopulation, theorem_population


@dataclass
class Context:
    """What every run shares: the config, populations and the reference G1 (the theorem's
    model at W^0 on the baseline's 1-var population, -grad of the first-order loss)."""

    cfg: DynamicsConfig
    dim: int
    train_1var: TokenPopulation
    train_mix: TokenPopulation | None
    eval_2var: TokenPopulation
    eval_all: TokenPopulation
    G1: Tensor
    restricted: dict[str, TokenPopulation] = field(default_factory=dict)  # `task`, by data
    allowed: TokenPopulation | None = None  # `task`: every kind, what its rules allow

    def training_population(self, releases: tuple[str, ...]) -> TokenPopulation:
        """The data of a variant: 1-var or the mix, with the task's rules under `task`."""
        key = "mix" if "mix" in releases else "1var"
        pop = self.train_mix if key == "mix" else self.train_1var
        if pop is None:
            raise ValueError("the context was built without the mix population")
        return self.restricted[key] if "task" in releases else pop

    @classmethod
    def build(cls, cfg: DynamicsConfig) -> Context:
        tcfg = cfg.theorem.model_config()
        dim = Layout(tcfg).dim
        train = theorem_population(tcfg, "1var")
        mix = None
        if "mix" in cfg.releases:
            mix_cfg = cfg.theorem.model_config(cfg.mix.operand_order)
            weights = {k: w for k, w in cfg.mix_weights().items() if w > 0}
            mix = theorem_population(mix_cfg, weights)
        G1 = model_g1(build_theorem_model(tcfg), train, dim)
        everything = theorem_population(tcfg, {"0var": 1, "1var": 1, "2var": 1})
        restricted, allowed = {}, None
        if "task" in cfg.releases:
            th, task = cfg.theorem, cfg.task
            r1, r2 = task.indices(th.K)
            held = held_out_pairs(th.p, task.held_out_fraction, task.held_out_seed)
            for key, pop in (("1var", train), ("mix", mix)):
                if pop is not None:
                    restricted[key] = restrict(pop, th.p, th.K, th.L, r1, r2, held)
            allowed = restrict(everything, th.p, th.K, th.L, r1, r2, held)
        return cls(cfg, dim, train, mix, theorem_population(tcfg, "2var"), everything, G1,
                   restricted, allowed)  # fmt: skip


def cosine(a: Tensor, b: Tensor) -> float | None:
    """cos(a, b) over all entries; None when either is 0."""
    na, nb = float(a.norm()), float(b.norm())
    if na == 0 or nb == 0 or not math.isfinite(na):
        return None
    return float((a * b).sum()) / (na * nb)


@dataclass
class RunResult:
    """One run's measures: per-step losses, the 2-var accuracy every `eval_every` steps, the
    cosines with G1 of W's first update, first ten and update across the spike (`_spike`), the
    first step at the threshold, whether the threshold holds on the last fifth (`sustained`),
    final accuracies, the final W's memory (`memory_entries`)."""

    variant: str
    releases: list[str]
    seed: int
    steps_run: int
    diverged: bool
    eval_steps: list[int]
    acc_2var: list[float]
    loss: list[float]
    emergence_step: int | None
    sustained: bool
    cos_first: float | None
    cos_first10: float | None
    spike: dict
    final: dict[str, float]
    memory: dict[str, float]
    seconds: float
    first_update: Tensor = field(repr=False)  # W_1 - W_0, basis block (not in the JSON)

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "first_update"}
        d["first_update_norm"] = float(self.first_update.norm())
        return d


def make_optimizer(model, cfg: DynamicsConfig, releases: tuple[str, ...]):
    """Freeze everything but the released pieces (and layer 2's W_Q) and build the run's
    optimiser with one parameter group per piece (config.py's rates)."""
    params = dict(model.named_parameters())
    for p in params.values():
        p.requires_grad_(False)
    adam = "adamw" in releases
    groups = []
    for group, names in trainable_names(releases, cfg.qk_factors).items():
        tensors = [params[n] for n in names]
        for t in tensors:
            t.requires_grad_(True)
        if adam:
            lr = cfg.adamw.lr_qk if group == "qk" else cfg.adamw.lr
        else:
            lr = cfg.sgd.lr_qk * model.cfg.attn_scale**2 if group == "qk" else cfg.sgd.lr
        groups.append({"params": tensors, "lr": lr, "name": group})
    if adam:
        return torch.optim.AdamW(groups, betas=tuple(cfg.adamw.betas),
                                 weight_decay=cfg.adamw.weight_decay)  # fmt: skip
    return torch.optim.SGD(groups, lr=groups[0]["lr"], momentum=0.0, weight_decay=0.0)


def _batch(pop: TokenPopulation, size: int, gen: torch.Generator):
    if size == 0:
        return pop.tokens, pop.labels, pop.weights / pop.weights.sum()
    idx = torch.multinomial(pop.weights, size, replacement=True, generator=gen)
    w = torch.full((size,), 1.0 / size, dtype=torch.float64)
    return pop.tokens[idx], pop.labels[idx], w


def memory_entries(block: Tensor) -> dict[str, float]:
    """The mean diagonal and off-diagonal entry of a bar_v x bar_v block (query ebar_u, key
    ebar_u'): the theorem's associative memory."""
    K = block.shape[0]
    return {"diag": float(block.diagonal().mean()),
            "offdiag": float((block.sum() - block.diagonal().sum()) / (K * (K - 1)))}  # fmt: skip


def _spike(steps: list[int], acc: list[float], Ws: dict[int, Tensor], G1: Tensor) -> dict:
    """The evaluation window with the largest rise of the 2-var accuracy, and the cosine of
    W's change across it with G1. Not the first window: at W^0 every 2-var sequence is a tie,
    and any step breaks the ties (0.20 -> 0.63 at p = 5, K = 3), a rise that is no composition."""
    if len(acc) < 3:
        return {"from_step": None, "step": None, "jump": None, "cos": None}
    i = max(range(1, len(acc) - 1), key=lambda j: acc[j + 1] - acc[j])
    a, b = steps[i], steps[i + 1]
    return {"from_step": a, "step": b, "jump": acc[i + 1] - acc[i],
            "cos": cosine(Ws[b] - Ws[a], G1)}  # fmt: skip


PERTURBATION_STREAM = 1_000_003  # the perturbation's generator: seed + this (not the batches')
SUSTAINED_FRACTION = 0.2  # "sustained": at the threshold on every evaluation of the last fifth


def perturb_start(opt, scale: float, seed: int) -> None:
    """Every trainable tensor X of `opt` becomes X + scale RMS(X) Z, Z standard normal drawn
    from its own generator (seed + PERTURBATION_STREAM; the tensors in the optimiser's
    order). A tensor that is all zero stays so (there is no scale to be relative to)."""
    if scale <= 0:
        return
    gen = torch.Generator().manual_seed(seed + PERTURBATION_STREAM)
    with torch.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                z = torch.randn(p.shape, generator=gen, dtype=p.dtype)
                p.add_(scale * p.pow(2).mean().sqrt() * z)


def sustained(steps: list[int], acc: list[float], total: int, threshold: float) -> bool:
    """Whether every evaluation in the last fifth of the run (steps s > (1 - 1/5) total) is
    at `threshold` or above (False when there is none: a run that stopped early)."""
    last = [a for s, a in zip(steps, acc, strict=True) if s > (1 - SUSTAINED_FRACTION) * total]
    return bool(last) and steps[-1] == total and all(a >= threshold for a in last)


def train_run(ctx: Context, releases: tuple[str, ...], seed: int) -> RunResult:
    """Train the theorem's model with `releases` freed, minibatch stream `seed` (and, with
    `init_perturbation`, its start perturbed by `seed`)."""
    cfg, dim = ctx.cfg, ctx.dim
    start = time.perf_counter()
    model = build_theorem_model(cfg.theorem.model_config())
    opt = make_optimizer(model, cfg, releases)
    perturb_start(opt, cfg.init_perturbation, seed)
    pop = ctx.training_population(releases)
    gen = torch.Generator().manual_seed(seed)

    def W_now() -> Tensor:
        return score_matrix(model)[:dim, :dim].clone()

    Ws = {0: W_now()}
    eval_steps, acc, losses = [0], [population_accuracy(model, ctx.eval_2var)["2var"]], []
    diverged = False
    for step in range(1, cfg.steps + 1):
        tokens, labels, w = _batch(pop, cfg.batch_size, gen)
        logits = model(tokens, fast=True)
        per_seq = cross_entropy_terms(logits, labels, 1.0)
        loss = (per_seq * w).sum()
        if not torch.isfinite(loss):
            diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if step in (1, 10):
            Ws[step] = W_now()
        if step % cfg.eval_every == 0 or step == cfg.steps:
            Ws[step] = W_now()
            eval_steps.append(step)
            acc.append(population_accuracy(model, ctx.eval_2var)["2var"])
            if not math.isfinite(acc[-1]) or not torch.isfinite(Ws[step]).all():
                diverged = True
                break
    emergence = next((s for s, a in zip(eval_steps, acc, strict=True) if a >= cfg.threshold),
                     None)  # fmt: skip
    final = {} if diverged else population_accuracy(model, ctx.eval_all)
    if final and "task" in releases and ctx.allowed is not None:
        final["2var_allowed"] = population_accuracy(model, ctx.allowed)["2var"]
    first = Ws[1] - Ws[0] if 1 in Ws else torch.zeros_like(Ws[0])
    memory = memory_entries(ebar_block(W_now(), cfg.theorem.model_config().sim_config()))
    return RunResult(
        variant=variant_name(releases), releases=list(releases), seed=seed,
        steps_run=len(losses), diverged=diverged, eval_steps=eval_steps, acc_2var=acc,
        loss=losses, emergence_step=emergence,
        sustained=sustained(eval_steps, acc, cfg.steps, cfg.threshold),
        cos_first=cosine(first, ctx.G1),
        cos_first10=cosine(Ws[10] - Ws[0], ctx.G1) if 10 in Ws else None,
        spike=_spike(eval_steps, acc, Ws, ctx.G1), final=final, memory=memory,
        seconds=time.perf_counter() - start, first_update=first,
    )  # fmt: skip
