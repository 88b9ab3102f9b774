"""AdamW over stacked [M, ...] parameters with a learning rate and weight decay per member.

    opt = MemberAdamW(model.params(), lrs=[1e-3, 3e-3], weight_decays=[1.0, 0.1], betas=(0.9, 0.98))
    opt.set_lr_scale(1.0)     # the schedule's factor (warm-up), applied to every member's lr
    opt.step()

Member m's slice is updated as `torch.optim.AdamW(lr=lrs[m], weight_decay=weight_decays[m])`
updates a single run (equal to float rounding), and its state_dict has AdamW's layout. Members
that share lr and weight decay use torch's own AdamW instead (bit-identical on CPU). An
optimiser state for a checkpoint is device-free (`portable_optimizer_state`) and loads keeping
the optimiser's own device flags (`load_optimizer_state`).
"""

from __future__ import annotations

import torch


def adamw_param_group(lr: float, weight_decay: float, betas: tuple[float, float]) -> dict:
    """The param group (without 'params') that torch.optim.AdamW would hold for one run."""
    probe = torch.optim.AdamW([torch.zeros(1)], lr=lr, weight_decay=weight_decay, betas=betas)
    group = dict(probe.state_dict()["param_groups"][0])
    group.pop("params")
    return group


class MemberAdamW(torch.optim.Optimizer):
    """AdamW whose lr and weight decay differ along the leading (member) axis of every
    parameter. `lrs` are the base rates; `set_lr_scale(s)` makes member m use s * lrs[m]."""

    def __init__(
        self, params: list[torch.Tensor], lrs: list[float], weight_decays: list[float],
        betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
    ):  # fmt: skip
        params = list(params)
        M = len(lrs)
        if len(weight_decays) != M:
            raise ValueError(f"{M} learning rates but {len(weight_decays)} weight decays")
        for p in params:
            if p.shape[0] != M:
                raise ValueError(f"parameter of shape {tuple(p.shape)}: leading axis is not {M}")
        super().__init__(params, {"lr": 1.0, "betas": tuple(betas), "eps": eps})
        self.base_lrs = [float(v) for v in lrs]
        self.weight_decays = [float(v) for v in weight_decays]
        self.scale = 1.0
        self._columns: dict[tuple, torch.Tensor] = {}

    def set_lr_scale(self, scale: float) -> None:
        self.scale = float(scale)

    def member_param_group(self, m: int) -> dict:
        """Member m's param group as a single run's AdamW holds it (at the current scale)."""
        group = self.param_groups[0]
        return adamw_param_group(
            self.scale * self.base_lrs[m], self.weight_decays[m], tuple(group["betas"])
        )

    def _per_member(self, values: list[float], like: torch.Tensor) -> torch.Tensor:
        """values as an [M, 1, ...] tensor shaped to broadcast over `like` (cached)."""
        key = (tuple(values), like.dtype, like.device, like.ndim)
        if key not in self._columns:
            if len(self._columns) > 64:
                self._columns.clear()
            shape = (len(values),) + (1,) * (like.ndim - 1)
            column = torch.tensor(values, dtype=like.dtype).view(shape)
            self._columns[key] = column.to(like.device)
        return self._columns[key]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            lrs = [self.scale * lr for lr in self.base_lrs]
            decay = [1.0 - lr * wd for lr, wd in zip(lrs, self.weight_decays, strict=True)]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                step = float(state["step"])
                grad = p.grad
                p.mul_(self._per_member(decay, p))
                state["exp_avg"].lerp_(grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1**step
                bias_correction2_sqrt = (1 - beta2**step) ** 0.5
                step_sizes = [lr / bias_correction1 for lr in lrs]
                denom = (state["exp_avg_sq"].sqrt() / bias_correction2_sqrt).add_(eps)
                p.sub_(self._per_member(step_sizes, p) * (state["exp_avg"] / denom))
        return loss


# the flags that say how a device ran AdamW, with the values a CPU run's state holds
_DEVICE_FLAGS = {"fused": None, "capturable": False, "foreach": None}


def portable_optimizer_state(state: dict) -> dict:
    """An optimiser state_dict as a CPU run's AdamW holds it: the learning rate a float, no
    fused / capturable / foreach flags (they say how this device ran it, and a checkpoint
    written on CUDA must resume on a CPU and back)."""
    groups = []
    for group in state["param_groups"]:
        group = dict(group)
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = float(group["lr"])
        for flag, portable in _DEVICE_FLAGS.items():
            if flag in group:
                group[flag] = portable
        groups.append(group)
    return {"state": state["state"], "param_groups": groups}


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """`optimizer.load_state_dict(state)`, keeping the optimiser's own device flags (so its
    step counters land where its kernels read them: on the GPU for fused AdamW)."""
    own = optimizer.param_groups
    groups = []
    for i, group in enumerate(state["param_groups"]):
        mine = own[min(i, len(own) - 1)]
        groups.append({**group, **{f: mine[f] for f in _DEVICE_FLAGS if f in mine}})
    optimizer.load_state_dict({"state": state["state"], "param_groups": groups})
