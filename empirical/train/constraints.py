"""Per-member constraints on the optimiser's updates: frozen parameter groups, and a labelled
direction projected out of the last block's W_QK (issue #36's interventions).

    constraints = UpdateConstraints.of(cfgs)      # None when no member has any
    constraints.before_step(values, grads)        # after the backward, before the optimiser
    constraints.after_step(values)                # after the optimiser step

`values[name]` and `grads[name]` are [M, ...] views of every parameter (a single run: M = 1).
train.freeze: the group's gradients are zeroed before the step (unseen by clipping and AdamW's
moments) and its weights put back after it, so it keeps its value exactly. train.project_out
(a label-space block G written by `save_direction`): after every step W_Q, W_K of the last
block move by the smallest change making <s Q* (W_QK' - W_QK) K*^T, G> = 0 (Q*, K*: the dual
vectors of the labelled query and key vectors before the step, empirical.model.labels;
s = sqrt(d_head)), found by Newton steps along (Y W_K, Y^T W_Q), Y = s Q*^T G K*.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field

import torch
from torch import Tensor

from empirical.config.io import ConfigError
from empirical.model.groups import group_of
from empirical.model.labels import col_labels, dual_vectors, ebar_of, query_key_vectors, row_labels
from empirical.report.files import atomic_write_bytes

NEWTON_STEPS = 4


def save_direction(path: str | os.PathLike, block, rows: list[str], cols: list[str],
                   what: str = "") -> None:  # fmt: skip
    """Write a label-space direction for train.project_out (atomically)."""
    payload = {
        "kind": "labelled_direction",
        "rows": list(rows),
        "cols": list(cols),
        "block": torch.as_tensor(block, dtype=torch.float64).clone(),
        "what": what,
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_direction(path: str, p: int, K: int, L: int) -> Tensor:
    """The block of a train.project_out file, checked against the run's labels."""
    where = f"train.project_out = {path!r}"
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except Exception as exc:
        raise ConfigError(f"{where}: not a direction file ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("kind") != "labelled_direction":
        raise ConfigError(f"{where}: not a direction file written by save_direction")
    if payload["rows"] != row_labels(K, L) or payload["cols"] != col_labels(p, K, L):
        raise ConfigError(f"{where}: its labels are not this task's (p = {p}, K = {K}, L = {L})")
    block = payload["block"].to(torch.float64)
    if not torch.isfinite(block).all() or block.norm() == 0:
        raise ConfigError(f"{where}: its block is zero or not finite")
    return block / block.norm()


@dataclass
class UpdateConstraints:
    """What each member's update is constrained by (module docstring)."""

    frozen: list[list[str]]  # per member: the parameter names held fixed
    directions: list[Tensor | None]  # per member: the unit label-space block, or None
    p: int
    K: int
    L: int
    last: int  # the last block's index
    scale: float  # sqrt(d_head)
    _saved: dict = field(default_factory=dict)

    @classmethod
    def of(cls, cfgs, names: list[str]) -> UpdateConstraints | None:
        """The members' constraints (cfgs: their RunConfigs; names: the parameter names)."""
        if not any(c.train.freeze or c.train.project_out for c in cfgs):
            return None
        model = cfgs[0].built_model_config()
        n_layers = model.n_layers
        frozen = [[n for n in names if group_of(n, n_layers) in c.train.freeze] for c in cfgs]
        task = cfgs[0].task
        directions = [
            load_direction(c.train.project_out, task.p, task.K, task.L)
            if c.train.project_out else None
            for c in cfgs
        ]  # fmt: skip
        return cls(frozen, directions, task.p, task.K, task.L, n_layers - 1,
                   float(model.attn_scale))  # fmt: skip

    def before_step(self, values: dict[str, Tensor], grads: dict[str, Tensor | None]) -> None:
        saved = {}
        with torch.no_grad():
            for m, names in enumerate(self.frozen):
                for n in names:
                    if grads.get(n) is not None:
                        grads[n][m] = 0.0
                    saved[(m, n)] = values[n][m].clone()
            for m, G in enumerate(self.directions):
                if G is not None:
                    saved[("qk", m)] = self._factors(values, m)
                    saved[("frame", m)] = self._constraint(values, m, G)
        self._saved = saved

    def after_step(self, values: dict[str, Tensor]) -> None:
        with torch.no_grad():
            for m, names in enumerate(self.frozen):
                for n in names:
                    values[n][m].copy_(self._saved[(m, n)])
            for m, G in enumerate(self.directions):
                if G is not None:
                    self._project(values, m)
        self._saved = {}

    # -- the projection ------------------------------------------------------------------------

    def _factors(self, values: dict[str, Tensor], m: int) -> tuple[Tensor, Tensor]:
        a = f"blocks.{self.last}.attn"
        return values[f"{a}.W_Q"][m, 0].double().clone(), values[f"{a}.W_K"][m, 0].double().clone()

    def _constraint(self, values: dict[str, Tensor], m: int, G: Tensor) -> Tensor:
        """Y [d, d] with <Y, X> = s <Q* X K*^T, G> (the dual-frame reading's G-component)."""
        E = values["embed.W_E"][m].double()
        P = values["pos_embed.W_pos"][m].double()
        ebar = ebar_of(E, values["blocks.0.attn.W_V"][m, 0].double(),
                       values["blocks.0.attn.W_O"][m, 0].double(), self.p, self.K)  # fmt: skip
        Q, Kv = query_key_vectors(E, P, ebar, ebar, self.p, self.K, self.L)
        return self.scale * dual_vectors(Q).T @ G @ dual_vectors(Kv)

    def _project(self, values: dict[str, Tensor], m: int) -> None:
        WQ0, WK0 = self._saved[("qk", m)]
        Y = self._saved[("frame", m)]
        WQ, WK = self._factors(values, m)
        start = float((Y * (WQ0 @ WK0.T)).sum())
        removed = float((Y * (WQ @ WK.T)).sum()) - start
        for _ in range(NEWTON_STEPS):
            residual = float((Y * (WQ @ WK.T)).sum()) - start
            if abs(residual) <= 1e-9 * abs(removed) or residual == 0.0:
                break
            A, B = Y @ WK, Y.T @ WQ
            alpha = residual / float((A * A).sum() + (B * B).sum())
            WQ, WK = WQ - alpha * A, WK - alpha * B
        a = f"blocks.{self.last}.attn"
        values[f"{a}.W_Q"][m, 0].copy_(WQ)
        values[f"{a}.W_K"][m, 0].copy_(WK)
