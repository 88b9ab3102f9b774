"""The whole training step (forward, loss, backward, optimiser) as one replayed CUDA graph.

    graphed = GraphedStep(full_step, optimizer, device)
    losses = graphed(tokens, labels, lr)       # each step; lr: this step's learning rate

A step is a few hundred small kernels, whose launches from Python cost more than running them
on a GPU (docs/gpu.md). Following torch's whole-network capture recipe, the first `warmup`
steps run eagerly on a side stream, the next is captured, and every later step copies its
batch into the graph's static inputs and replays: the same kernels on the same tensors, so
the same numbers up to the GPU's own nondeterminism. The capture needs torch's fused AdamW
with `capturable=True` and a tensor lr (filled here each step), fixed shapes, no host sync in
the step and autocast without its weight cache. Once a member stops, the learner runs eagerly
for the rest of the session; never on a CPU or with `train.compile`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def graph_applies(device: torch.device, enabled: bool, compile_mode: str) -> bool:
    """Whether a learner on `device` captures its step (train.cuda_graph, train.compile)."""
    return device.type == "cuda" and enabled and compile_mode == "none"


class GraphedStep:
    """`full_step(tokens, labels) -> losses` (forward, backward and optimiser step, gradients
    set to None before it) run eagerly `warmup` times, then captured and replayed."""

    def __init__(
        self, full_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        optimizer: torch.optim.Optimizer, device: torch.device, warmup: int = 3,
    ):  # fmt: skip
        self.full_step, self.optimizer, self.device = full_step, optimizer, device
        self.warmup = warmup
        self.eager_steps = 0
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_tokens = self.static_labels = self.static_losses = None

    def _use_lr_tensor(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr

    def __call__(self, tokens: torch.Tensor, labels: torch.Tensor, lr: float) -> torch.Tensor:
        self.lr.fill_(lr)
        if self.graph is None:
            self._use_lr_tensor()  # (a resume's load_state_dict put a float back)
            if self.eager_steps < self.warmup:
                return self._eager(tokens, labels)
            self._capture(tokens, labels)
        self.static_tokens.copy_(tokens)
        self.static_labels.copy_(labels)
        self.graph.replay()
        return self.static_losses

    def _eager(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            self.optimizer.zero_grad(set_to_none=True)
            losses = self.full_step(tokens, labels)
        main.wait_stream(side)
        self.eager_steps += 1
        return losses

    def _capture(self, tokens: torch.Tensor, labels: torch.Tensor) -> None:
        self.static_tokens, self.static_labels = tokens.clone(), labels.clone()
        self.optimizer.zero_grad(set_to_none=True)  # backward allocates grads in the graph
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_losses = self.full_step(self.static_tokens, self.static_labels)
        self.graph = graph
