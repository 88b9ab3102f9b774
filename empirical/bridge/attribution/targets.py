"""The scalar targets the attribution splits, as float64 functions of the weights
(`float64_weights`) with their gradients: `loss/<set>` (mean cross-entropy at `=` on the set's
first `n` sequences), `score` and `score_barv` (the labelled scores' change along the window's
total change, whole and bar_v block) (docs/attribution.md, "Targets").

    Targets.of(cfg, sets, n=1000, start=w_A, end=w_B).gradients(w)  # {target: {name: grad}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from empirical.bridge.compare_qk.coords import col_labels, row_labels
from empirical.bridge.compare_qk.metrics import SUBBLOCKS
from empirical.model.config import ModelConfig
from empirical.model.fast import param_names
from empirical.model.forward import forward
from empirical.model.labels import ebar_of, query_key_vectors

SCORE_TARGETS = ("score", "score_barv")


def float64_weights(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A model's state_dict as float64 CPU copies (the parameters only)."""
    return {n: state[n].detach().to("cpu", torch.float64).clone() for n in param_names(2)}


def labelled_scores(w: Mapping[str, Tensor], p: int, K: int, L: int, scale: float) -> Tensor:
    """S = Q W_Q W_K^T K^T / scale of block 1 between the labelled vectors [2 + K, C]: the
    block compare-qk's `Coordinates.project(theorem_w(model))` computes, differentiable."""
    ebar = ebar_of(w["embed.W_E"], w["blocks.0.attn.W_V"][0], w["blocks.0.attn.W_O"][0], p, K)
    Q, Kv = query_key_vectors(w["embed.W_E"], w["pos_embed.W_pos"], ebar, ebar, p, K, L)
    W = w["blocks.1.attn.W_Q"][0] @ w["blocks.1.attn.W_K"][0].T
    return (Q @ W @ Kv.T) / scale


@dataclass
class Targets:
    """The targets of one window (module docstring)."""

    model_cfg: ModelConfig
    p: int
    K: int
    L: int
    sets: dict[str, tuple[Tensor, Tensor]]  # name -> (tokens [n, L], labels [n])
    S0: Tensor  # the labelled scores at the window's start
    U: dict[str, Tensor]  # score target -> unit direction of the total change ([R, C], 0 off-block)

    @classmethod
    def of(cls, cfg, sets: Mapping, n: int, start: Mapping[str, Tensor], end: Mapping[str, Tensor]):
        """`cfg`: the run's RunConfig; `sets`: its EvalSets (name -> Batch); `n` sequences of
        each; `start`, `end`: the window's float64 weights (they fix the score directions)."""
        model_cfg = cfg.built_model_config()
        if model_cfg.n_layers != 2 or model_cfg.n_heads != 1:
            raise ValueError(
                "the attribution is written for the paper's 2-layer, one-head model; this run "
                f"has model.n_layers = {model_cfg.n_layers}, model.n_heads = {model_cfg.n_heads}"
            )
        p, K, L = cfg.task.p, cfg.task.K, cfg.task.L
        chosen = {
            name: (b.tokens[:n].to("cpu").long(), b.labels[:n].to("cpu").long())
            for name, b in sets.items()
        }
        scale = float(model_cfg.attn_scale)
        with torch.no_grad():
            S0 = labelled_scores(start, p, K, L, scale)
            dS = labelled_scores(end, p, K, L, scale) - S0
        rows, cols = row_labels(K, L), col_labels(p, K, L)
        U = {}
        for target, sub in (("score", "all"), ("score_barv", "barv_barv")):
            rp, cp = SUBBLOCKS[sub]
            mask = torch.tensor([[rp(r) and cp(c) for c in cols] for r in rows])
            d = torch.where(mask, dS, torch.zeros_like(dS))
            norm = d.norm()
            U[target] = d / norm if norm > 0 else d
        return cls(model_cfg, p, K, L, chosen, S0, U)

    @property
    def names(self) -> list[str]:
        return [f"loss/{s}" for s in self.sets] + list(SCORE_TARGETS)

    def _loss(self, w: Mapping[str, Tensor], name: str) -> Tensor:
        tokens, labels = self.sets[name]
        stacked = {k: v.unsqueeze(0) for k, v in w.items()}
        logits = forward(stacked, tokens.unsqueeze(0), self.model_cfg, positions="answer")[0]
        return F.cross_entropy(logits, labels)

    def _score(self, w: Mapping[str, Tensor], target: str) -> Tensor:
        S = labelled_scores(w, self.p, self.K, self.L, float(self.model_cfg.attn_scale))
        return ((S - self.S0) * self.U[target]).sum()

    def value(self, w: Mapping[str, Tensor], target: str) -> Tensor:
        if target.startswith("loss/"):
            return self._loss(w, target[len("loss/") :])
        return self._score(w, target)

    def values(self, w: Mapping[str, Tensor]) -> dict[str, float]:
        with torch.no_grad():
            return {t: float(self.value(w, t)) for t in self.names}

    def gradients(self, w: Mapping[str, Tensor], names=None) -> dict[str, dict[str, Tensor]]:
        """{target: {parameter: d target / d parameter}} at `w` (float64), for `names`
        (default: every target)."""
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in w.items()}
        out = {}
        for t in names or self.names:
            value = self.value(leaves, t)
            grads = torch.autograd.grad(value, list(leaves.values()), allow_unused=True)
            out[t] = {
                k: (torch.zeros_like(v) if g is None else g)
                for (k, v), g in zip(leaves.items(), grads, strict=True)
            }
        return out
