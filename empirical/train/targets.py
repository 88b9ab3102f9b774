"""Training and evaluating on per-position targets (a family whose every node is a label: the
graph family; `Batch.targets`), for the feedforward and the recurrent model alike.

    context = row_context(cfg, batch)                   # offsets, T per row, value slots
    loss = target_loss(weights, batch, cfg)             # the training loss (model.* switches)
    scores = score_targets(model, batch)                # per-position predictions and losses

The loss: the cross-entropy at every target position of each row's last readout; with
model.latent_supervision, the mean over iterations t of the cross-entropy of readout t over
the targets of depth <= t (of the rows still iterating). Families without targets never come
here (their training and evaluation are the answer position's, unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from empirical.model.config import ModelConfig
from empirical.model.forward import RowContext, forward, row_iterations
from empirical.task.batch import Batch

POSITIONAL = ("tokens", "targets", "target_depths")  # the Batch fields with a column a position


def row_context(
    cfg: ModelConfig, batch: Batch, corrupt: bool = False, every_iteration: bool = False,
    teacher: bool = False,
) -> RowContext:
    """What the forward needs of `batch`'s rows: their positional offsets, their T (with
    model.recurrence = "depth": the graph's depth + model.iterations) and, with
    model.discrete_state, their value slots (the target positions: where a node is named,
    which the tokens alone determine); `teacher`: the true values and depths of the nodes for
    model.teacher_forcing (training only)."""
    depth = batch.target_depths.max(1).values.clamp(min=0)
    iterations = depth + cfg.iterations if cfg.recurrence == "depth" else None
    return RowContext(
        pos_offset=batch.pos_offset,
        iterations=iterations,
        slots=batch.targets >= 0 if cfg.discrete_state else None,
        corrupt=corrupt,
        every_iteration=every_iteration,
        teacher=batch.targets if teacher else None,
        teacher_depths=batch.target_depths if teacher else None,
    )


def target_loss(weights: Mapping[str, Tensor], batch: Batch, cfg: ModelConfig) -> Tensor:
    """The training loss of `batch` (module docstring); values fed back between iterations
    are corrupted with odds model.corruption (after model.teacher_forcing's true values), in
    a share model.corrupted_batches of the batches (one draw of torch's generator a batch, made
    only when that share is below 1)."""
    per_iteration = cfg.recurrent and cfg.latent_supervision
    corrupt = cfg.corrupted_batches >= 1 or bool(torch.rand(()) < cfg.corrupted_batches)
    context = row_context(cfg, batch, corrupt=corrupt, every_iteration=per_iteration,
                          teacher=cfg.teacher_forcing)  # fmt: skip
    logits = forward(weights, batch.tokens, cfg, context=context).float()
    targets = batch.targets
    if not per_iteration:
        return F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1), ignore_index=-1)
    T = logits.shape[0]
    rows = row_iterations(cfg, batch.tokens, context)
    steps = torch.arange(T, device=targets.device)
    counted = (batch.target_depths[None] <= steps[:, None, None]) & (targets[None] >= 0)
    counted &= steps[:, None, None] < rows[None, :, None]  # [T, batch, pos]
    safe = torch.where(counted, targets[None], 0)
    ce = F.cross_entropy(logits.flatten(0, 2), safe.reshape(-1), reduction="none")
    ce = torch.where(counted.reshape(-1), ce, 0.0).view(counted.shape)
    n = counted.sum((1, 2))
    per_step = ce.sum((1, 2)) / n.clamp(min=1)
    return per_step[n > 0].mean()


@dataclass
class TargetScores:
    """Per position of a batch: the prediction (argmax of each row's last readout), whether
    it is right and its cross-entropy (targets only; elsewhere False and 0)."""

    predictions: Tensor  # (n, L) long
    correct: Tensor  # (n, L) bool
    loss: Tensor  # (n, L) float64
    targets: Tensor  # (n, L) long, -1: no target

    @property
    def nodes(self) -> int:
        return int((self.targets >= 0).sum())

    def node_accuracy(self) -> float:
        return float(self.correct.sum()) / max(self.nodes, 1)

    def row_correct(self) -> Tensor:
        """(n,) bool: every target of the row right."""
        return (self.correct | (self.targets < 0)).all(1)


def _used_width(tokens: Tensor, targets: Tensor) -> int:
    """Columns up to the last target of any row (the causal model's readouts there do not
    depend on the pads after)."""
    cols = (targets >= 0).any(0).nonzero()
    return int(cols.max()) + 1 if len(cols) else tokens.shape[1]


def _one_step_logits(weights, tokens: Tensor, cfg: ModelConfig, context: RowContext,
                     depths: Tensor) -> Tensor:  # fmt: skip
    """[batch, pos, vocab]: at each node, the readout of the iteration that resolves it (its
    depth), the nodes of smaller depth fed their true values (`context` with a teacher)."""
    every = forward(weights, tokens, cfg, context=context)  # [T, batch, pos, vocab]
    at = depths.clamp(0, every.shape[0] - 1)
    return every.gather(0, at[None, ..., None].expand(1, *every.shape[1:]))[0]


@torch.no_grad()
def score_targets(model, batch: Batch, batch_size: int = 256,
                  one_step: bool = False) -> TargetScores:  # fmt: skip
    """`TargetScores` of `model` (an AssignAddTransformer, put in eval mode for the call) on
    every row of `batch`, `batch_size` rows at a time, each chunk cut after its last target.
    one_step (a recurrent model with model.discrete_state): each node scored from the readout
    of the iteration of its depth, the shallower nodes fed their true values: one step of the
    layer-by-layer algorithm from a right state, no error carried from earlier steps."""
    if one_step and not (model.cfg.recurrent and model.cfg.discrete_state):
        raise ValueError("one_step scores a recurrent model with model.discrete_state (the "
                         "true values are fed through the discrete state)")  # fmt: skip
    n, L = batch.tokens.shape
    device = batch.tokens.device
    pred = torch.full((n, L), -1, dtype=torch.long, device=device)
    loss = torch.zeros((n, L), dtype=torch.float64, device=device)
    weights = dict(model.named_parameters(remove_duplicate=False))
    was_training = model.training
    model.eval()
    try:
        for start in range(0, n, batch_size):
            part = batch.slice(start, min(n, start + batch_size))
            width = _used_width(part.tokens, part.targets)
            part = part.replace(**{f: getattr(part, f)[:, :width] for f in POSITIONAL})
            if one_step:
                context = row_context(model.cfg, part, every_iteration=True, teacher=True)
                logits = _one_step_logits(weights, part.tokens, model.cfg, context,
                                          part.target_depths)  # fmt: skip
            else:
                logits = forward(weights, part.tokens, model.cfg,
                                 context=row_context(model.cfg, part))  # fmt: skip
            logits = logits.float()
            rows = slice(start, start + len(part))
            pred[rows, :width] = logits.argmax(-1)
            safe = part.targets.clamp(min=0)
            ce = F.cross_entropy(logits.flatten(0, 1), safe.reshape(-1), reduction="none")
            loss[rows, :width] = ce.view(len(part), width).double()
    finally:
        model.train(was_training)
    has = batch.targets >= 0
    return TargetScores(pred, has & (pred == batch.targets), torch.where(has, loss, 0.0),
                        batch.targets)  # fmt: skip
