"""A run's training replayed from one of its checkpoints, with the weights at every step: the
training step itself with the run's data stream restored, bit for bit the run's own weights on
the CPU kind it was trained on (docs/training.md, "Determinism").

    for step, state in replay(cfg, load_training_state(path), stop=5000): ...
    check_replayed(run, 5000, state)   # {"file": ..., "equal": True, "max_abs_diff": 0.0}
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import replace

import torch
from torch import Tensor

from empirical.model.checkpoint import load_checkpoint
from empirical.runs.rundir import RunDir
from empirical.task.pairs import training_generator
from empirical.task.sampler import run_training_sampler
from empirical.train.batches import BatchStream
from empirical.train.engine import restore_data_generator
from empirical.train.learners import SingleLearner


def replay(cfg, checkpoint: dict, stop: int) -> Iterator[tuple[int, dict[str, Tensor]]]:
    """(step, weights) from the checkpoint's step to `stop`, the checkpoint's own weights
    first; `cfg` the run's RunConfig, `checkpoint` a training checkpoint of it
    (empirical.train.state.load_training_state). torch's global RNG is restored after."""
    for step, learner in replay_learner(cfg, checkpoint, stop):
        yield step, learner_weights(learner)


def replay_learner(cfg, checkpoint: dict, stop: int) -> Iterator[tuple[int, object]]:
    """`replay`'s steps with the learner itself (model and optimiser after `step` steps)."""
    start = int(checkpoint["step"])
    if stop < start:
        raise ValueError(f"cannot replay from step {start} back to {stop}")
    device = torch.device("cpu")
    cfg = replace(cfg, train=replace(cfg.train, device="cpu", init_from=""))
    with torch.random.fork_rng(devices=[]):
        learner = SingleLearner(cfg, device)
        # a copy: the optimiser adopts the state's tensors and updates them in place
        optimizer_state = copy.deepcopy(checkpoint["optimizer_state"])
        learner.load([{**checkpoint, "optimizer_state": optimizer_state}])
        torch.set_rng_state(checkpoint["torch_rng_state"])
        sampler = run_training_sampler(cfg.task, cfg.seed, device)
        generator = training_generator(cfg.seed, device)
        restore_data_generator(generator, checkpoint["data_rng_state"], cfg.seed, start)
        stream = BatchStream(sampler, generator, cfg.train.batch_size, cfg.train.sample_chunk)
        step = start
        yield step, learner
        while step < stop:
            batch = stream.next()
            learner.train_step(batch.tokens[None], batch.labels[None], [True], step)
            step += 1
            yield step, learner


def adam_denominators(learner) -> dict[str, Tensor]:
    """{parameter name: sqrt(v / (1 - beta2^t)) + eps} of the learner's AdamW (float64):
    what the next steps divide each gradient entry by ({} before the first step)."""
    opt = learner.optimizer
    group = opt.param_groups[0]
    beta2, eps = group["betas"][1], group["eps"]
    out = {}
    for name, param in learner.model.named_parameters():
        state = opt.state.get(param, {})
        if "exp_avg_sq" not in state:
            return {}
        t = float(state["step"])
        v_hat = state["exp_avg_sq"].detach().double() / (1 - beta2**t)
        out[name] = v_hat.sqrt() + eps
    return out


def learner_weights(learner) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in learner.model.state_dict().items()}


def stored_weights(run: RunDir, step: int) -> tuple[str, dict[str, Tensor]] | None:
    """(path, weights) of the run's snapshot at `step`, or of its last checkpoint if that is
    at `step` (None: the run keeps no weights of that step)."""
    path = run.snapshot(step)
    if path.is_file():
        return str(path), load_checkpoint(path)["model_state"]
    if run.last_checkpoint.is_file():
        ckpt = load_checkpoint(run.last_checkpoint)
        if int(ckpt.get("step", -1)) == step:
            return str(run.last_checkpoint), ckpt["model_state"]
    return None


def check_replayed(run: RunDir, step: int, state: dict[str, Tensor]) -> dict:
    """Whether the replayed weights at `step` equal the run's own (its snapshot or
    checkpoint there), bit for bit: {"step", "file", "equal", "max_abs_diff"}; file None
    when the run keeps no weights of that step."""
    found = stored_weights(run, step)
    if found is None:
        return {"step": step, "file": None, "equal": None, "max_abs_diff": None}
    path, stored = found
    equal = all(torch.equal(stored[k], state[k]) for k in stored)
    diff = max(float((stored[k].double() - state[k].double()).abs().max()) for k in stored)
    return {"step": step, "file": path, "equal": equal, "max_abs_diff": diff}
