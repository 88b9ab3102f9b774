"""How the positional embedding's training affects the graph family (docs/graph.md,
"Positions"): a short training of one config, per-node accuracy of every evaluation set every
200 steps (200 graphs a set), then the trained-range set's nodes by kind and depth.

    python scripts/graph_position_probe.py STEPS [key=value ...] [--sinusoidal]

STEPS: training steps (AdamW, the config's lr and weight decay, 100 warm-up steps, cosine);
overrides: dotted config fields on configs/graph.toml (e.g. task.graph_shift=false);
--sinusoidal: W_pos set to the fixed sin/cos embedding of Vaswani et al. and not trained.
"""

from __future__ import annotations

import math
import sys
import time

import torch

from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import load_run_config
from empirical.task.eval_sets import build_eval_set
from empirical.task.graph.vocab import GraphVocabulary
from empirical.task.pairs import training_generator
from empirical.task.sampler import run_training_sampler
from empirical.train.targets import score_targets, target_loss


def sinusoidal(rows: int, d: int) -> torch.Tensor:
    pos = torch.arange(rows)[:, None].float()
    angle = pos / 10000 ** (2 * torch.arange(d // 2)[None].float() / d)
    return torch.cat([torch.sin(angle), torch.cos(angle)], 1)


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    fixed = "--sinusoidal" in argv
    argv = [a for a in argv if a != "--sinusoidal"]
    steps, overrides = int(argv[0]), argv[1:]
    cfg = load_run_config("configs/graph.toml", overrides)
    torch.manual_seed(cfg.seed)
    model = AssignAddTransformer(cfg.built_model_config(), seed=cfg.seed)
    if fixed:
        with torch.no_grad():
            model.W_pos.copy_(sinusoidal(*model.W_pos.shape))
        model.pos_embed.W_pos.requires_grad_(False)
    sampler = run_training_sampler(cfg.task, cfg.seed)
    gen = training_generator(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    tc = cfg.train
    opt = torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas)
    names = [f"graph/n{n}" for n in cfg.task.graph_eval_nodes]
    sets = {n: build_eval_set(cfg.task, cfg.seed, n)[0][:200] for n in names}
    weights = dict(model.named_parameters())
    start = time.time()
    for step in range(1, steps + 1):
        lr = tc.lr * min(1, step / 100) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for group in opt.param_groups:
            group["lr"] = lr
        loss = target_loss(weights, sampler.sample(tc.batch_size, gen), model.cfg)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, tc.grad_clip or 1.0)
        opt.step()
        if step % 200 == 0 or step == steps:
            accs = {n: round(score_targets(model, b, 100).node_accuracy(), 3)
                    for n, b in sets.items()}  # fmt: skip
            print(step, round(loss.item(), 3), accs, f"{time.time() - start:.0f}s", flush=True)
    batch = sets[names[1]]
    scores = score_targets(model, batch, 100)
    vocab = GraphVocabulary(cfg.task.p, cfg.task.K, cfg.task.L)
    kinds: dict[str, list[bool]] = {}
    for i in range(len(batch)):
        for node in vocab.nodes(batch.tokens[i]):
            right = bool(scores.correct[i, node.position])
            kind = "leaf" if node.literal is not None else f"{len(node.operands)} operands"
            kinds.setdefault(kind, []).append(right)
            kinds.setdefault(f"depth {node.depth}", []).append(right)
    print({k: (round(sum(v) / len(v), 3), len(v)) for k, v in sorted(kinds.items())})


if __name__ == "__main__":
    main(sys.argv[1:])
