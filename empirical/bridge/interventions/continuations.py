"""Continuations of a run from one training checkpoint, as one batch of members: every
condition times every replicate, each replicate its own data order, the same for every
condition (paired), each from the checkpoint's weights and AdamW state (docs/attribution.md,
"`intervene`").

    out = continue_members(cfg, checkpoint, members, eval_sets, Plan(steps=2000))
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from empirical.bridge.compare_qk.coords import coordinates, theorem_w
from empirical.bridge.compare_qk.frames import Frames
from empirical.bridge.interventions.conditions import CONDITIONS
from empirical.model.transformer import AssignAddTransformer
from empirical.task.pairs import derive_seed
from empirical.task.sampler import run_training_sampler
from empirical.train.batches import BatchStream
from empirical.train.learners import BatchLearner


@dataclass
class Plan:
    steps: int = 2000  # steps of each continuation
    replicates: int = 20  # data orders per condition
    conditions: tuple[str, ...] = tuple(CONDITIONS)
    eval_every: int = 50
    eval_size: int = 1000  # sequences of each tracked set
    jump_set: str = "1var/ind"  # the set whose rise is the jump
    threshold: float = 0.9  # the jump: the first evaluation at >= this accuracy
    also_track: tuple[str, ...] = ("2var/ind",)
    cosine_steps: tuple[int, ...] = (100, 500)  # horizons of the W_QK update cosines
    device: str = "cpu"


def start_model(cfg, checkpoint: dict) -> AssignAddTransformer:
    model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed)
    model.load_state_dict(checkpoint["model_state"])
    return model


def _streams(cfg, replicates, start: int, device) -> dict[int, BatchStream]:
    """Replicate r's data stream: the run's sampler, a generator seeded by (the run's seed,
    "intervention", r, the checkpoint's step)."""
    sampler = run_training_sampler(cfg.task, cfg.seed, device)
    out = {}
    for r in replicates:
        gen = torch.Generator(device=device)
        gen.manual_seed(derive_seed(cfg.seed, "intervention", r, start))
        out[r] = BatchStream(sampler, gen, cfg.train.batch_size, cfg.train.sample_chunk)
    return out


class _Measures:
    """What the continuations record: accuracies on the tracked sets, W_QK updates."""

    def __init__(self, cfg, checkpoint: dict, sets, plan: Plan, learner, device):
        M = learner.n_members
        self.learner, self.plan = learner, plan
        tracked = [plan.jump_set]
        tracked += [s for s in plan.also_track if s in sets and s != plan.jump_set]
        self.evals = {
            s: (
                sets[s].tokens[: plan.eval_size].to(device).long().expand(M, -1, -1),
                sets[s].labels[: plan.eval_size].to(device).long(),
            )
            for s in tracked
        }
        model0 = start_model(cfg, checkpoint)
        self.frames = Frames(coordinates(model0, cfg.task.p, cfg.task.K, cfg.task.L))
        self.W0 = theorem_w(model0)
        self.curves = {s: [] for s in tracked}
        self.eval_steps, self.updates = [], {}

    def evaluate(self, step: int) -> None:
        self.eval_steps.append(step)
        with torch.no_grad():
            for s, (tokens, labels) in self.evals.items():
                logits = self.learner.model.forward_fast(tokens)
                hits = (logits.argmax(-1) == labels).double().mean(1)
                self.curves[s].append(hits.cpu().numpy())

    def read_updates(self, horizon: int) -> None:
        model_of, W0 = self.learner.model_of, self.W0
        blocks = [
            self.frames.read(theorem_w(model_of(m)) - W0, "dual")
            for m in range(self.learner.n_members)
        ]
        self.updates[horizon] = np.stack(blocks)

    def members(self, members) -> list[dict]:
        acc = {s: np.stack(v, axis=1) for s, v in self.curves.items()}  # [M, evals]
        out = []
        for m, (name, r, _) in enumerate(members):
            hit = np.nonzero(acc[self.plan.jump_set][m] >= self.plan.threshold)[0]
            out.append({
                "condition": name,
                "replicate": r,
                "curve": {s: acc[s][m].tolist() for s in acc},
                "jump_step": int(self.eval_steps[hit[0]]) if len(hit) else None,
            })  # fmt: skip
        return out


def continue_members(cfg, checkpoint: dict, members, sets, plan: Plan, progress: bool = True):
    """Train every member `plan.steps` steps from `checkpoint`, measuring the tracked sets'
    accuracies every `plan.eval_every` steps and the W_QK updates at `plan.cosine_steps`. Returns
    {"start", "last_step", "eval_steps", "members": [{"condition", "replicate", "curve":
    {set: [acc]}, "jump_step"}], "updates": {horizon: [M, R, C] dual-frame W_QK changes},
    "rows", "cols"}."""
    device = torch.device(plan.device)
    cfgs = [replace(c, train=replace(c.train, device=str(device))) for _, _, c in members]
    learner = BatchLearner(cfgs, device)
    learner.load([checkpoint] * len(cfgs))
    start = int(checkpoint["step"])
    index = [r for _, r, _ in members]
    streams = _streams(cfg, sorted(set(index)), start, device)
    measures = _Measures(cfg, checkpoint, sets, plan, learner, device)
    measures.evaluate(start)
    steps = range(start, start + plan.steps)
    if progress:
        steps = tqdm(steps, desc=f"continue {len(members)} members", leave=False)
    alive = [True] * len(members)
    for step in steps:
        drawn = {r: stream.next() for r, stream in streams.items()}
        tokens = torch.stack([drawn[r].tokens for r in index])
        labels = torch.stack([drawn[r].labels for r in index])
        learner.train_step(tokens, labels, alive, step)
        done = step + 1 - start
        if done % plan.eval_every == 0 or done == plan.steps:
            measures.evaluate(step + 1)
        if done in plan.cosine_steps:
            measures.read_updates(done)
    dual = measures.frames.coords["dual"]
    return {
        "start": start, "last_step": start + plan.steps, "eval_steps": measures.eval_steps,
        "members": measures.members(members), "updates": measures.updates,
        "rows": dual.rows, "cols": dual.cols,
    }  # fmt: skip
