"""Read a TransformerLens `HookedTransformer` state dict (the paper authors' checkpoints) into
our `AssignAddTransformer`.

    sd = read_tl_state_dict("checkpoint_step_5301.pth")    # flat dict of tensors
    model = convert_tl_state_dict(sd, model_cfg, where="checkpoint_step_5301.pth")
    logits = tl_reference_forward(sd, their_tokens)         # their layout, [batch, pos, p]

Their ids: 0..p-1 numbers, p `+`, p+1 `=`, p+2 pad, p+3..p+K+2 variables; ours put the
variables at p..p+K-1 and `+`, `=`, pad after them. Conversion permutes the rows of
`embed.W_E` and copies every other weight; anything but our architecture (a nonzero bias or
block-0 MLP, another mask, other sizes) is a `CheckpointError` naming every difference.
`tl_reference_forward` is an independent plain-torch forward in their layout, to check a
conversion (docs/import.md).
"""

from __future__ import annotations

import io
import math
import os
import re
from pathlib import Path

import torch
from torch import Tensor

from empirical.config.io import load_failure
from empirical.model.checkpoint import CheckpointError
from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer

# the final model's file name in the authors' release (its step is not in the name)
FINAL_NAME = "model_state_dict.pth"
CHECKPOINT_SUFFIXES = (".pth", ".pt")
_STEP_RE = re.compile(r"(?:^|.*[_\-.])step[_\-]?(\d+)\.(?:pth|pt)")

N_LAYERS = 2
BIASES = ("attn.b_Q", "attn.b_K", "attn.b_V", "attn.b_O", "mlp.b_in", "mlp.b_out")
BUFFERS = ("attn.mask", "attn.IGNORE")  # optional (older TransformerLens saves them)
# any masked-score value at or below this is a mask (TransformerLens uses -inf or -1e5)
MAX_IGNORE = -1e4


# -- token ids ------------------------------------------------------------------------------


def their_token_names(p: int, K: int) -> list[str]:
    """The name of each of their ids: numbers, `+`, `=`, pad, then the variables a.."""
    letters = [chr(ord("a") + i) for i in range(K)]
    return [str(i) for i in range(p)] + ["+", "=", "pad"] + letters


def their_to_our_ids(p: int, K: int) -> Tensor:
    """LongTensor [p + K + 3]: our id of each of their ids."""
    numbers = list(range(p))
    specials = [p + K, p + K + 1, p + K + 2]  # their +, =, pad at p, p+1, p+2
    variables = list(range(p, p + K))  # their a.. at p+3..
    return torch.tensor(numbers + specials + variables, dtype=torch.long)


def our_to_their_ids(p: int, K: int) -> Tensor:
    """LongTensor [p + K + 3]: their id of each of our ids (the inverse permutation)."""
    fwd = their_to_our_ids(p, K)
    inv = torch.empty_like(fwd)
    inv[fwd] = torch.arange(fwd.numel())
    return inv


def token_map(p: int, K: int) -> dict:
    """The id map as a provenance record: both layouts in words and, per token name,
    [their id, our id]."""
    fwd = their_to_our_ids(p, K).tolist()
    names = their_token_names(p, K)
    return {
        "theirs": f"0..{p - 1} numbers, {p} +, {p + 1} =, {p + 2} pad, {p + 3}..{p + K + 2} "
        "variables a..",
        "ours": f"0..{p - 1} numbers, {p}..{p + K - 1} variables a.., {p + K} +, {p + K + 1} =, "
        f"{p + K + 2} pad",
        "ids": {name: [t, o] for t, (name, o) in enumerate(zip(names, fwd, strict=True))},
    }


# -- file names -----------------------------------------------------------------------------


def step_from_name(path: str | os.PathLike, final_step: int) -> int:
    """The training step of a checkpoint file from its name: `..._step_N.pth` -> N (the
    number of optimiser updates done), `model_state_dict.pth` -> `final_step`. Any other
    name is a CheckpointError (a step cannot be guessed)."""
    name = Path(path).name
    if name == FINAL_NAME:
        return int(final_step)
    m = _STEP_RE.fullmatch(name)
    if m is None:
        raise CheckpointError(
            f"{path}: no step number in the file name (expected checkpoint_step_N.pth, or "
            f"{FINAL_NAME} for the final model); rename it or move it out of the source folder"
        )
    return int(m.group(1))


def is_checkpoint_name(path: str | os.PathLike) -> bool:
    """Whether a file in a source folder is one to import (a torch file: .pth or .pt)."""
    return Path(path).suffix in CHECKPOINT_SUFFIXES


# -- reading and checking -------------------------------------------------------------------


def read_tl_state_dict(path: str | os.PathLike, data: bytes | None = None) -> dict[str, Tensor]:
    """The flat {name: tensor} dict saved at `path` (read with weights_only=True; `data`:
    the file's bytes, already read)."""
    path = Path(path)
    if data is None and not path.is_file():
        raise CheckpointError(f"{path}: not a file")
    try:
        source = io.BytesIO(data) if data is not None else path
        sd = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a bad file
        raise CheckpointError(
            f"{path}: cannot be read as a torch.save file of tensors ({load_failure(exc)})"
        ) from None
    if not isinstance(sd, dict):
        raise CheckpointError(f"{path}: expected a state dict (a dict), found {type(sd).__name__}")
    bad = [str(k) for k, v in sd.items() if not isinstance(k, str) or not isinstance(v, Tensor)]
    if bad:
        raise CheckpointError(
            f"{path}: not a flat state dict of tensors (entries {', '.join(bad[:4])} are not)"
        )
    return sd


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter of a TransformerLens HookedTransformer of our sizes (with biases and
    a block-0 MLP), by name. Buffers (BUFFERS) are checked separately."""
    cfg.require_complete()
    d, e, h, m = cfg.d_model, cfg.d_head_, cfg.n_heads, cfg.d_mlp
    shapes: dict[str, tuple[int, ...]] = {
        "embed.W_E": (cfg.d_vocab, d),
        "pos_embed.W_pos": (cfg.n_ctx, d),
    }
    for layer in range(N_LAYERS):
        b = f"blocks.{layer}."
        shapes.update({f"{b}attn.W_{x}": (h, d, e) for x in "QKV"})
        shapes[f"{b}attn.W_O"] = (h, e, d)
        shapes.update({f"{b}attn.b_{x}": (h, e) for x in "QKV"})
        shapes[f"{b}attn.b_O"] = (d,)
        shapes.update({f"{b}mlp.W_in": (d, m), f"{b}mlp.W_out": (m, d)})
        shapes.update({f"{b}mlp.b_in": (m,), f"{b}mlp.b_out": (d,)})
    shapes["unembed.W_U"] = (d, cfg.d_vocab_out)
    shapes["unembed.b_U"] = (cfg.d_vocab_out,)
    return shapes


def _size_problems(sd: dict[str, Tensor], cfg: ModelConfig, p: int, K: int) -> list[str]:
    """The task sizes that do not fit, in the task's words (d_vocab, n_ctx, d_vocab_out)."""
    out = []
    checks = (
        ("embed.W_E", 0, "d_vocab", cfg.d_vocab, f"p + K + 3 = {p} + {K} + 3"),
        ("pos_embed.W_pos", 0, "n_ctx", cfg.n_ctx, "the sequence length L"),
        ("unembed.W_U", 1, "d_vocab_out", cfg.d_vocab_out, "p, one output per number"),
    )
    for key, dim, what, need, why in checks:
        t = sd.get(key)
        if t is not None and t.dim() == 2 and t.shape[dim] != need:
            out.append(
                f"{what} = {t.shape[dim]} ({key} {list(t.shape)}), but the config's task needs "
                f"{what} = {need} ({why})"
            )
    return out


def check_tl_state_dict(
    sd: dict[str, Tensor], cfg: ModelConfig, p: int, K: int, where: str = "<state dict>"
) -> None:
    """Refuse (CheckpointError naming every difference) a state dict that is not exactly our
    architecture in TransformerLens names, for a task with p numbers and K variables."""
    cfg.require_complete()
    shapes = expected_shapes(cfg)
    buffers = {f"blocks.{i}.{b}" for i in range(N_LAYERS) for b in BUFFERS}
    problems = _size_problems(sd, cfg, p, K)
    problems += [f"missing {k}" for k in shapes if k not in sd]
    problems += [f"unexpected {k}" for k in sd if k not in shapes and k not in buffers]
    problems += [
        f"{k} has shape {list(sd[k].shape)}, expected {list(shape)}"
        for k, shape in shapes.items()
        if k in sd and tuple(sd[k].shape) != shape
    ]
    if problems:
        raise CheckpointError(_message(where, "does not fit the config's model", problems))
    for k in shapes:
        if not sd[k].is_floating_point():
            problems.append(f"{k} has dtype {sd[k].dtype}, expected a floating-point tensor")
        elif not bool(torch.isfinite(sd[k]).all()):
            problems.append(f"{k} holds non-finite values")
    biases = [f"blocks.{layer}.{b}" for layer in range(N_LAYERS) for b in BIASES]
    must_be_zero = [(k, "no biases") for k in [*biases, "unembed.b_U"]]
    must_be_zero += [(f"blocks.0.mlp.W_{x}", "no MLP in block 0") for x in ("in", "out")]
    for k, why in must_be_zero:
        if k in sd and sd[k].is_floating_point() and bool((sd[k] != 0).any()):
            max_value = float(sd[k].abs().max())
            problems.append(f"{k} is not zero (max |value| {max_value:.3g}): our model has {why}")
    causal = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
    for layer in range(N_LAYERS):
        mask = sd.get(f"blocks.{layer}.attn.mask")
        if mask is not None and (
            mask.shape != causal.shape or not torch.equal(mask.bool(), causal)
        ):
            problems.append(
                f"blocks.{layer}.attn.mask {list(mask.shape)} is not the causal "
                f"(lower-triangular) {cfg.n_ctx} x {cfg.n_ctx} mask"
            )
        ignore = sd.get(f"blocks.{layer}.attn.IGNORE")
        if ignore is not None and not (ignore.numel() == 1 and float(ignore) <= MAX_IGNORE):
            problems.append(
                f"blocks.{layer}.attn.IGNORE = {ignore.tolist()} does not mask a score (must be "
                f"one value <= {MAX_IGNORE:g}, e.g. -inf)"
            )
    if problems:
        raise CheckpointError(_message(where, "is not our architecture", problems))


def _message(where: str, what: str, problems: list[str]) -> str:
    shown = "; ".join(problems[:8])
    more = f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
    return f"{where}: {what}: {shown}{more}"


# -- conversion -----------------------------------------------------------------------------


def convert_tl_state_dict(
    sd: dict[str, Tensor], cfg: ModelConfig, p: int, K: int, where: str = "<state dict>"
) -> AssignAddTransformer:
    """Our model with the weights of the TransformerLens state dict `sd` (checked first):
    `embed.W_E` rows permuted from their token ids to ours, every other weight copied."""
    check_tl_state_dict(sd, cfg, p, K, where)
    model = AssignAddTransformer(cfg, seed=0)
    dtype = cfg.torch_dtype
    ours = {}
    for key in model.state_dict():
        ours[key] = sd[key].detach().to("cpu", dtype).clone()
    ours["embed.W_E"] = ours["embed.W_E"][our_to_their_ids(p, K)].contiguous()
    model.load_state_dict(ours, strict=True)
    return model


def to_their_tokens(tokens: Tensor, p: int, K: int) -> Tensor:
    """Our token ids -> their ids (same shape)."""
    return our_to_their_ids(p, K).to(tokens.device)[tokens]


# -- reference forward in their layout -------------------------------------------------------


@torch.no_grad()
def tl_reference_forward(sd: dict[str, Tensor], tokens: Tensor) -> Tensor:
    """Logits [batch, pos, d_vocab_out] of a 2-layer TransformerLens HookedTransformer (no
    LayerNorm, ReLU MLP in both blocks, biases) given by its state dict, on token ids of ITS
    vocabulary: embed + pos_embed, then per block resid += attn(resid); resid += mlp(resid);
    logits = resid W_U + b_U. Plain torch, computed in float64."""

    def w(name: str) -> Tensor:
        return sd[name].detach().to("cpu", torch.float64)

    tokens = tokens.long().cpu()
    length = tokens.shape[1]
    resid = w("embed.W_E")[tokens] + w("pos_embed.W_pos")[:length][None]
    for layer in range(N_LAYERS):
        b = f"blocks.{layer}."
        q = torch.einsum("bpd,hde->bphe", resid, w(b + "attn.W_Q")) + w(b + "attn.b_Q")
        k = torch.einsum("bpd,hde->bphe", resid, w(b + "attn.W_K")) + w(b + "attn.b_K")
        v = torch.einsum("bpd,hde->bphe", resid, w(b + "attn.W_V")) + w(b + "attn.b_V")
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
        scores = scores.masked_fill(~causal, float("-inf"))
        pattern = torch.softmax(scores, dim=-1)
        z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
        attn_out = torch.einsum("bqhe,hed->bqd", z, w(b + "attn.W_O")) + w(b + "attn.b_O")
        resid = resid + attn_out
        pre = resid @ w(b + "mlp.W_in") + w(b + "mlp.b_in")
        resid = resid + torch.relu(pre) @ w(b + "mlp.W_out") + w(b + "mlp.b_out")
    return resid @ w("unembed.W_U") + w("unembed.b_U")


def last_position_logits(model: AssignAddTransformer, tokens: Tensor) -> Tensor:
    """Our model's full (hooked) forward at the last position, [batch, d_vocab_out], whether
    `forward` returns [batch, d_vocab_out] or [batch, pos, d_vocab_out]."""
    with torch.no_grad():
        logits = model(tokens)
    return logits[:, -1] if logits.dim() == 3 else logits
