"""Shared pieces of the analyses: the layer-2 MLP, a light forward pass, small helpers, and
`to_jsonable` (the numbers as analysis.json holds them).

Conventions of every module of `empirical.analysis` (docs/analysis.md, "Conventions"): layers
are 0-indexed like TransformerLens's blocks (the paper's "layer 1" is block 0; names say `l1` /
`l2` in the paper's numbering); `qk_matrix(model, layer)` is W_Q W_K^T / sqrt(d_head), the
scores as the model computes them; `ov_matrix(model, layer)` is W_V W_O; the probe data are
drawn from the task's *unrestricted* distribution (empirical.analysis.probe_data).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from empirical.config.io import ConfigError
from empirical.model.fast import fast_forward, member_weights
from empirical.task.config import TaskConfig
from empirical.task.vocab import Vocabulary


# -- circuit matrices -------------------------------------------------------------------
def mlp_out(model, x: Tensor) -> Tensor:
    """The layer-2 MLP on residual vectors x [..., d_model] (ReLU, no biases)."""
    return torch.relu(x @ model.W_in) @ model.W_out


# -- a light forward pass ---------------------------------------------------------------
@dataclass
class LightForward:
    """What the per-snapshot measures need, without any [batch, L, d_model] tensor (one head).

    pattern1 [B, L, L]: layer-1 attention; pattern2 [B, L]: layer-2 attention of the last
    position (`=`); resid_mid [B, d] and logits [B, p] at the last position. The residual
    after layer 1 (blocks.0.hook_resid_post) is computed on demand: `resid1_at(rows, pos)`
    for chosen (row, position) pairs, `resid1` for all of them.

    With several heads, `patterns1` [B, h, L, L] and `patterns2` [B, h, L] are every head's
    and pattern1 / pattern2 the layer's: the heads' mean (for softmax heads, what a query
    reads averaged over the heads; for linear attention and HYLA, the mean of their signed
    codes; docs/heads.md); the residual after layer 1 is then held (`resid1_full`).
    """

    pattern1: Tensor
    pattern2: Tensor
    resid_mid: Tensor
    logits: Tensor
    tokens: Tensor = field(repr=False)
    C: Tensor = field(repr=False)  # [W_E; W_pos[:L]], [V + L, d]
    COV: Tensor | None = field(repr=False)  # C @ W_OV^1 (one head)
    patterns1: Tensor | None = field(default=None, repr=False)  # [B, h, L, L] (heads)
    patterns2: Tensor | None = field(default=None, repr=False)  # [B, h, L]
    resid1_full: Tensor | None = field(default=None, repr=False)  # [B, L, d] (heads)

    def rows(self, i: int, j: int) -> LightForward:
        """The rows i..j-1 (a sub-batch)."""
        def cut(x):
            return None if x is None else x[i:j]

        return LightForward(self.pattern1[i:j], self.pattern2[i:j], self.resid_mid[i:j],
                            self.logits[i:j], self.tokens[i:j], self.C, self.COV,
                            cut(self.patterns1), cut(self.patterns2),
                            cut(self.resid1_full))  # fmt: skip

    @property
    def n_heads(self) -> int:
        return 1 if self.patterns1 is None else self.patterns1.shape[1]

    def resid1_at(self, rows: Tensor, pos: Tensor) -> Tensor:
        """Residual after layer 1 at (rows[i], pos[i]), [n, d]: the input embedding plus the
        attention-weighted layer-1 OV images of the tokens and positions attended to."""
        rows, pos = rows.to(self.tokens.device), pos.to(self.tokens.device)
        if self.resid1_full is not None:
            return self.resid1_full[rows, pos]
        V = self.C.shape[0] - self.tokens.shape[1]
        x = self.C[self.tokens[rows, pos]] + self.C[V + pos]
        return x + _pool(self.pattern1[rows, pos], self.tokens[rows], V) @ self.COV

    @property
    def resid1(self) -> Tensor:
        B, L = self.tokens.shape
        rows = torch.arange(B, device=self.tokens.device).repeat_interleave(L)
        pos = torch.arange(L, device=self.tokens.device).repeat(B)
        return self.resid1_at(rows, pos).reshape(B, L, -1)


def _pool(w: Tensor, tokens: Tensor, V: int) -> Tensor:
    """Weights w [n, L] per position -> [n, V + L] per id (token ids, then positions), so
    that sum_t w_t (C[tok_t] + C[V + t]) = _pool(w) @ C."""
    return torch.cat([w.new_zeros(w.shape[0], V).scatter_add(1, tokens, w), w], dim=1)


@torch.no_grad()
def light_forward(model, tokens: Tensor, chunk: int = 2048) -> LightForward:
    """The model's forward pass (same numbers as `run_with_cache`, up to float rounding),
    computed by the one fast forward (empirical.model.fast, `internals=True`): layer 1 from
    per-id tables, layer 2 only for the last query, so no [batch, L, d_model] tensor is built
    (memory traffic dominates on the CPU). A 2-layer model with several heads (any
    model.attention): by `run_with_cache`, every head's patterns kept (LightForward)."""
    tokens = tokens.to(model.device)
    if not model.cfg.paper_layout:
        raise ConfigError(
            "light_forward reads the paper's model (learned positions, no normalization); this "
            f"one has model.positions = {model.cfg.positions!r}, model.normalization = "
            f"{model.cfg.normalization!r}: use model.run_with_cache"
        )
    if model.cfg.n_layers == 2 and model.cfg.n_heads > 1:
        return _hooked_light_forward(model, tokens, chunk)
    weights = member_weights(model)
    parts = []
    for i in range(0, len(tokens), chunk):
        tok = tokens[i : i + chunk]
        out = fast_forward(weights, tok.unsqueeze(0), model.cfg.attn_scale, internals=True)
        parts.append((out.pattern1[0], out.pattern2[0], out.resid_mid[0], out.logits[0], tok))
    C, COV = out.C[0], out.C_OV[0]
    if len(parts) == 1:
        return LightForward(*parts[0], C, COV)
    return LightForward(*(torch.cat(column) for column in zip(*parts, strict=True)), C, COV)


_HEAD_HOOKS = ("blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern",
               "blocks.0.hook_resid_post", "blocks.1.hook_resid_mid")  # fmt: skip


def _hooked_light_forward(model, tokens: Tensor, chunk: int) -> LightForward:
    """`light_forward` of a 2-layer model with several heads, from `run_with_cache`."""
    parts = []
    for i in range(0, len(tokens), chunk):
        tok = tokens[i : i + chunk]
        logits, cache = model.run_with_cache(tok, last_only=True,
                                             names_filter=lambda n: n in _HEAD_HOOKS)  # fmt: skip
        p1, p2, resid1, mid = (cache[n] for n in _HEAD_HOOKS)
        parts.append((p1, p2[:, :, -1], mid[:, -1], logits, tok, resid1))
    p1, p2, mid, logits, tok, resid1 = (torch.cat(c) for c in zip(*parts, strict=True))
    C = torch.cat([model.W_E, model.W_pos[: tokens.shape[1]]])
    return LightForward(p1.mean(1), p2.mean(1), mid, logits, tok, C, None, p1, p2, resid1)


@torch.no_grad()
def last_position_hooks(model, tokens: Tensor, names: tuple[str, ...], chunk: int = 2048):
    """The activations of the hooks `names` at the last position, [n, d] each (a tuple), by
    `run_with_cache` over chunks of `tokens`."""
    parts = []
    for i in range(0, len(tokens), chunk):
        _, cache = model.run_with_cache(tokens[i : i + chunk], names_filter=lambda n: n in names)
        parts.append([cache[name][:, -1] for name in names])
    return tuple(torch.cat(column) for column in zip(*parts, strict=True))


# -- small helpers ----------------------------------------------------------------------
def sums_mod_p(p: int, device=None) -> Tensor:
    """(x + y) mod p for every operand pair (x, y), [p, p]."""
    x = torch.arange(p)
    return ((x[:, None] + x[None, :]) % p).to(device)


def number_positions(task: TaskConfig, tokens: Tensor, first: int = 0) -> tuple[Tensor, Tensor]:
    """(row, position) of every assigned number: the numbers at positions first..L-5 of the
    assignment region (each follows its variable)."""
    rows, pos = torch.nonzero(tokens[:, first : task.L - 4] < task.p, as_tuple=True)
    return rows, pos + first


def prev_token_share(task: TaskConfig, batch, fw: LightForward, first: int = 0) -> float:
    """Share of the assigned numbers (positions first..L-5) whose layer-1 attention is strictly
    largest on the previous token, their variable."""
    rows, pos = number_positions(task, batch.tokens, first)
    rows, pos = rows.to(fw.pattern1.device), pos.to(fw.pattern1.device)
    pat = fw.pattern1[rows, pos]  # [n, L] (masked future positions are 0)
    valid = torch.arange(task.L, device=pat.device)[None, :] <= pos[:, None]
    return strict_argmax_is(pat, pos - 1, valid).double().mean().item()


def number_features(task: TaskConfig, batch, fw: LightForward, first: int = 0):
    """(residual after layer 1, variable) at the assigned numbers (positions first..L-5)."""
    rows, pos = number_positions(task, batch.tokens, first)
    X = fw.resid1_at(rows, pos)
    y = batch.tokens[rows, pos - 1] - task.p
    return X, y.to(X.device)


def token_labels(vocab: Vocabulary, tokens: Tensor) -> list[str]:
    """Axis labels "pos:token" of one sequence."""
    return [f"{i}:{vocab.names[int(t)]}" for i, t in enumerate(tokens.tolist())]


@contextmanager
def torch_threads(n: int | None):
    """Temporarily run torch with n CPU threads (None or 0: leave as is)."""
    if not n:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def strict_argmax_is(scores: Tensor, target: Tensor, valid: Tensor | None = None) -> Tensor:
    """Per row: whether the score at `target` is strictly above every other valid score
    (ties count as failure). scores [..., n]; target [...] long; valid [..., n] bool."""
    if valid is not None:
        scores = scores.masked_fill(~valid, float("-inf"))
    at = scores.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    others = scores.scatter(-1, target.unsqueeze(-1), float("-inf"))
    return at > others.max(dim=-1).values


def to_jsonable(obj, digits: int = 6):
    """Tensors / arrays -> nested lists, floats rounded to `digits` significant digits,
    NaN / inf -> None (what analysis.json holds)."""
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy()
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, digits) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return float(f"{x:.{digits}g}")
    return obj
