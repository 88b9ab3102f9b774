"""Accuracy and loss of a model on named evaluation sets: every set concatenated once, one
forward per `batch_size` rows of the concatenation, optionally on a fixed random subsample.

    evaluator = SetEvaluator(sets, batch_size=4096, subsample=1000, seed=0)
    acc, loss, n = evaluator.evaluate(model)               # every sequence of every set
    acc, loss, n = evaluator.evaluate(model, full=False)   # <= 1000 sequences per set
    record = evaluate_and_log(model, evaluator, run.metrics, step, train_loss, lr, elapsed)

Evaluations are full at step 0, at multiples of train.full_eval_every and at the end; in
between, with train.eval_subsample > 0, they read the subsample and the record says so
(`eval_n`: sequences per set).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from empirical.runs.metrics_log import append_metrics
from empirical.task.pairs import derive_seed
from empirical.train.targets import score_targets


def subsample_rows(size: int, subsample: int, seed: int, name: str) -> torch.Tensor:
    """The fixed rows (sorted) a subsampled evaluation reads of a set of `size` sequences:
    `subsample` of them drawn without replacement from a generator seeded by (seed, set name),
    or all of them when the set is not larger."""
    if subsample <= 0 or size <= subsample:
        return torch.arange(size)
    generator = torch.Generator().manual_seed(derive_seed(seed, "eval_subsample", name))
    return torch.randperm(size, generator=generator)[:subsample].sort().values


class SetEvaluator:
    """The evaluation sets (a dict name -> Batch) of one run, concatenated on their device."""

    def __init__(self, sets: dict, batch_size: int = 4096, subsample: int = 0, seed: int = 0):
        self.sets = sets
        self.names = list(sets)
        self.batch_size = batch_size
        self.sizes = {name: len(batch) for name, batch in sets.items()}
        device = next(iter(sets.values())).tokens.device if sets else torch.device("cpu")
        self.device = device
        if sets:
            self.tokens = torch.cat([b.tokens for b in sets.values()])
            self.labels = torch.cat([b.labels for b in sets.values()])
        else:
            self.tokens = self.labels = torch.zeros(0, dtype=torch.long, device=device)
        self.subsample = subsample
        self.sub_rows, self.sub_sizes = self._subsample_index(subsample, seed)
        # sets labelled per position (the graph family): scored set by set, per node
        self.per_position = any(b.has_targets for b in sets.values())
        self.seed = seed
        self.row_acc: dict[str, float] = {}  # per set: rows whose every target is right

    def _subsample_index(self, subsample: int, seed: int):
        """Rows of the concatenation a subsampled evaluation reads, and how many per set."""
        if not subsample:
            return None, dict(self.sizes)
        rows, sizes, at = [], {}, 0
        for name, size in self.sizes.items():
            picked = subsample_rows(size, subsample, seed, name)
            rows.append(picked + at)
            sizes[name] = len(picked)
            at += size
        index = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long)
        return index.to(self.device), sizes

    @torch.no_grad()
    def evaluate(self, model, full: bool = True) -> tuple[dict, dict, dict]:
        """({name: accuracy}, {name: mean cross-entropy}, {name: sequences read}) of `model`
        (put in eval mode for the call) on every sequence (`full`) or on the subsample."""
        if self.per_position:
            return self._evaluate_targets(model, full)
        subsampled = not full and self.sub_rows is not None
        tokens = self.tokens[self.sub_rows] if subsampled else self.tokens
        labels = self.labels[self.sub_rows] if subsampled else self.labels
        sizes = self.sub_sizes if subsampled else self.sizes
        was_training = model.training
        model.eval()
        n = tokens.shape[0]
        correct = torch.zeros(n, dtype=torch.bool, device=tokens.device)
        losses = torch.zeros(n, dtype=torch.float64, device=tokens.device)
        try:
            for start in range(0, n, self.batch_size):
                end = min(n, start + self.batch_size)
                logits = model.forward_fast(tokens[start:end]).float()
                if logits.dim() == 3:  # [batch, pos, d_vocab_out]: the answer is at the last
                    logits = logits[:, -1]
                target = labels[start:end]
                correct[start:end] = logits.argmax(-1) == target
                losses[start:end] = F.cross_entropy(logits, target, reduction="none").double()
        finally:
            model.train(was_training)
        if not self.names:
            return {}, {}, {}
        segment = torch.repeat_interleave(
            torch.arange(len(self.names), device=tokens.device),
            torch.tensor([sizes[name] for name in self.names], device=tokens.device),
        )
        counts = torch.zeros(len(self.names), dtype=torch.float64, device=tokens.device)
        sums = torch.zeros_like(counts)
        counts.index_add_(0, segment, correct.double())
        sums.index_add_(0, segment, losses)
        counts_l, sums_l = counts.tolist(), sums.tolist()  # one transfer each
        size = [max(sizes[name], 1) for name in self.names]
        acc = {name: counts_l[i] / size[i] for i, name in enumerate(self.names)}
        loss = {name: sums_l[i] / size[i] for i, name in enumerate(self.names)}
        return acc, loss, dict(sizes)


    def _evaluate_targets(self, model, full: bool) -> tuple[dict, dict, dict]:
        """Per set: the accuracy and mean cross-entropy over its nodes (target positions),
        and (`row_acc`) the share of rows with every node right; the subsample as above."""
        acc, loss, sizes = {}, {}, {}
        for name, batch in self.sets.items():
            if not full and self.subsample:
                batch = batch[subsample_rows(len(batch), self.subsample, self.seed, name)]
            scores = score_targets(model, batch, self.batch_size)
            nodes = max(scores.nodes, 1)
            acc[name] = scores.node_accuracy()
            loss[name] = float(scores.loss.sum()) / nodes
            self.row_acc[name] = float(scores.row_correct().double().mean())
            sizes[name] = len(batch)
        return acc, loss, sizes


def evaluate_sets(model, sets: dict, batch_size: int = 4096) -> tuple[dict, dict]:
    """({name: accuracy}, {name: loss}) over every sequence of every evaluation set."""
    acc, loss, _ = SetEvaluator(sets, batch_size).evaluate(model)
    return acc, loss


def is_full_evaluation(tc, step: int) -> bool:
    """Whether the evaluation at `step` reads every sequence of every set (see the module
    docstring): always without train.eval_subsample."""
    if not tc.eval_subsample or step in (0, tc.steps):
        return True
    return step % tc.full_eval_every == 0


def evaluate_and_log(
    model, evaluator: SetEvaluator, metrics_path, step, train_loss, lr, elapsed,
    fingerprint=None, full: bool = True,
):  # fmt: skip
    """Evaluate every set (all of it, or the evaluator's subsample) and append one record to
    metrics.jsonl (with the run's config `fingerprint`, if given); returns the record."""
    acc, loss, n = evaluator.evaluate(model, full=full)
    record = {
        "step": step,
        "train_loss": None if train_loss is None or math.isnan(train_loss) else train_loss,
        "lr": lr,
        "elapsed_s": round(elapsed, 3),
        "acc": acc,
        "loss": loss,
    }
    if evaluator.per_position:
        record["row_acc"] = dict(evaluator.row_acc)
    if not full:
        record["eval_n"] = n
    if fingerprint:
        record["fingerprint"] = fingerprint
    append_metrics(metrics_path, record)
    return record
