"""`ModelConfig`: the architecture of the paper's transformer (2 layers, 1 head) as a dataclass.

The fields are what a run may change (docs/model.md has the table); the task-derived sizes
(`d_vocab`, `d_vocab_out`, `n_ctx`) and `d_head` stay None until `with_task(p, K, L)` /
`for_task(p, K, L)` fill them. The fixed rest of the architecture is exposed read-only under
TransformerLens's `cfg` names (`mlp_layers`, `attn_only`, ...), so `ActivationCache`'s helpers
and `transformer_lens.patching` can read it. `cfg.device` (not a field: never saved) is the
device of the model that holds the config, kept up to date by the model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from empirical.config.field_types import COLON, checked, choice, fail, integer, number
from empirical.config.io import ConfigError, config_class

if TYPE_CHECKING:
    import torch

# torch is imported only where a torch object is made (the config validates without it, so
# that `python -m empirical` answers a bad config before importing torch): validation reads
# these names, `torch_dtype`, `activation` and the config's `device` make the torch objects
DTYPE_NAMES = ("float32", "float64")
# the MLP's activation by `model.act_fn`: ReLU (the paper's model) or x^2 (the quadratic MLP
# that writes Theorem C.1's Fourier MLP exactly, empirical.bridge.theorem_model)
ACTIVATION_NAMES = ("relu", "quadratic")
N_LAYERS = (2, 4)  # the allowed model.n_layers, inclusive
# model.attention: how scores become a pattern and values are mixed (empirical.model.attention;
# docs/heads.md): the paper's softmax, seed 003's linear attention (scores normalised across
# the heads) and HYLA (that normalisation and a ReLU value network mixed by the heads' code)
ATTENTION_KINDS = ("softmax", "linear", "hyla")
# model.recurrence: "none" (feedforward), "fixed" (the blocks applied model.iterations times),
# "depth" (per input: its graph's depth + model.iterations times); docs/graph.md
RECURRENCE = ("none", "fixed", "depth")
# model.positions: how a token knows where it is. "learned": the paper's learned absolute
# embedding W_pos; "relative": no W_pos in the residual stream, and each attention score gets a
# learned bias per head by the distance from key to query, distances >= relative_window sharing
# one (a clipped relative-position bias, as T5's; any length is then a trained one: docs/graph.md)
POSITIONS = ("learned", "relative")
# model.normalization: "none" (the paper's model) or "LNPre" (TransformerLens's name: a
# LayerNorm without weights, x - mean(x) divided by its RMS) before each attention, the MLP
# and the unembedding, as seed 002's blocks (docs/graph.md, "Normalization")
NORMALIZATION = ("none", "LNPre")
# model.corruption_scope: which fed-back values training may corrupt. "all": every slot's;
# "last": only those of the nodes resolved at the iteration just done (depth t before iteration
# t + 1; needs model.teacher_forcing, which knows the depths), seed 002's "last" strategy
CORRUPTION_SCOPES = ("all", "last")


def _torch():
    """The torch module, imported on the first torch object a config makes."""
    import torch

    return torch


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype called `name` (one of DTYPE_NAMES)."""
    if name not in DTYPE_NAMES:
        raise ConfigError(f"model.dtype: {name!r} is not one of {list(DTYPE_NAMES)}")
    return getattr(_torch(), name)


def dtype_name(dtype: torch.dtype) -> str | None:
    """The name (one of DTYPE_NAMES) of a torch dtype, None if it is none of them."""
    name = str(dtype).removeprefix("torch.")
    return name if name in DTYPE_NAMES else None


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The MLP activation function called `name` (one of ACTIVATION_NAMES)."""
    if name not in ACTIVATION_NAMES:
        raise ConfigError(f"model.act_fn: {name!r} is not one of {list(ACTIVATION_NAMES)}")
    torch = _torch()
    return torch.nn.functional.relu if name == "relu" else torch.square


def task_sizes(p: int, K: int, L: int) -> dict[str, int]:
    """`d_vocab`, `d_vocab_out`, `n_ctx` for the task's token layout.

    Ids 0..p-1 are numbers, p..p+K-1 variables, then `+`, `=`, `pad` (layout of empirical.task);
    the output classes are the numbers 0..p-1; a sequence has L tokens.
    """
    for name, value in (("p", p), ("K", K), ("L", L)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"task size {name} must be a positive integer, got {value!r}")
    return {"d_vocab": p + K + 3, "d_vocab_out": p, "n_ctx": L}


def size():
    """A positive integer: "model.{field}: must be a positive integer, got v"."""

    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise fail(f"must be a positive integer, got {value!r}", colon=True)
        return value

    return checked(int, check)


def model_flag():
    """true or false: "model.{field}: must be true or false, got v"."""

    def check(value):
        if not isinstance(value, bool):
            raise fail(f"must be true or false, got {value!r}", colon=True)
        return value

    return checked(bool, check)


def _check_recurrence(cfg) -> None:
    """The mechanisms need a recurrent model; corruption acts on the discrete state."""
    if cfg.recurrence == "none":
        for name, default in (("iterations", 1), ("latent_supervision", False),
                              ("discrete_state", False), ("corruption", 0.0)):  # fmt: skip
            if getattr(cfg, name) != default:
                raise ConfigError(
                    f"model.{name} = {getattr(cfg, name)!r} needs a recurrent model: set "
                    "model.recurrence to 'fixed' or 'depth' (or leave it at its default "
                    f"{default!r})"
                )
    if cfg.corruption and not cfg.discrete_state:
        raise ConfigError(
            f"model.corruption = {cfg.corruption!r} corrupts the values fed back between "
            "iterations: set model.discrete_state = true (or model.corruption = 0)"
        )
    for name, default in (("corrupted_batches", 1.0), ("corruption_scope", "all")):
        if getattr(cfg, name) != default and not cfg.corruption:
            raise ConfigError(
                f"model.{name} = {getattr(cfg, name)!r} says how training corrupts the fed-back "
                f"values: set model.corruption > 0 (or leave it at its default {default!r})"
            )
    if cfg.corruption_scope == "last" and not cfg.teacher_forcing:
        raise ConfigError(
            "model.corruption_scope = 'last' corrupts the values of the nodes resolved at the "
            "iteration just done, which the teacher's depths name: set model.teacher_forcing "
            "= true (or model.corruption_scope = 'all')"
        )
    if cfg.teacher_forcing and not (cfg.discrete_state and cfg.latent_supervision):
        raise ConfigError(
            "model.teacher_forcing = true feeds the true values of the nodes resolved so far "
            "into the discrete state and trains each iteration on them: set "
            "model.discrete_state = true and model.latent_supervision = true (or "
            "model.teacher_forcing = false)"
        )
    if cfg.tied_layers and cfg.recurrent:
        raise ConfigError(
            "model.tied_layers = true with model.recurrence: the recurrent block already "
            "shares its weights across iterations; set one of them"
        )


@config_class("model")
class ModelConfig:
    """Architecture of the 2-layer, 1-head, layer-2-MLP-only transformer (paper Section 3).

    d_model 128, d_mlp 512 (ours); n_heads (1: the paper's; TransformerLens's conventions);
    d_head (None: d_model // n_heads, which must divide); n_layers 2..4 (n > 2: attention-only
    blocks before the last, which has the MLP); tied_layers (middle blocks share one
    attention, empirical.model.tied); init_std (None: 0.8 / sqrt(d_model)); dtype; act_fn
    ("relu" or "quadratic": Theorem C.1's Fourier MLP); attention ("softmax", "linear" or
    "hyla": docs/heads.md; saved only when not "softmax"); normalization ("none" or "LNPre",
    saved only when set); d_vocab / d_vocab_out / n_ctx (None
    until `with_task`: p + K + 3, p, L). docs/model.md has every field.
    """

    d_model: size() = 128
    n_heads: size() = 1
    d_head: size() | None = None
    d_mlp: size() = 512
    n_layers: integer(N_LAYERS[0], N_LAYERS[1], wording=COLON, in_dots=True) = 2
    tied_layers: model_flag() = False
    # -- recurrence (docs/graph.md, "The recurrent model"): the n_layers blocks, one shared
    # block applied T times; the mechanisms of seed 002 as switches
    recurrence: choice(*RECURRENCE, wording=COLON) = "none"
    iterations: size() = 1  # "fixed": T; "depth": T = the input's graph depth + this
    latent_supervision: model_flag() = False  # a loss after every iteration (depth <= t)
    discrete_state: model_flag() = False  # values read out and embedded again between them
    corruption: number(0, 1, hi_open=True, wording=COLON,
                       message="must be a number in [0, 1) (the odds that a fed-back value is "
                       "replaced by a random one in training)") = 0.0  # fmt: skip
    # the share of training batches that are corrupted at all (a draw a batch; seed 002: 0.05,
    # with odds 0.5 a value and scope "last"); 1: every batch
    corrupted_batches: number(0, 1, lo_open=True, wording=COLON,
                              message="must be a number in (0, 1] (the share of training "
                              "batches whose fed-back values are corrupted)") = 1.0  # fmt: skip
    corruption_scope: choice(*CORRUPTION_SCOPES, wording=COLON) = "all"
    # training feeds the true values of the nodes of depth <= t into iteration t + 1 (the
    # model's own readout elsewhere; evaluation: the model's everywhere), so each iteration
    # learns one step of the algorithm from a right state (seed 002's teacher-forced state)
    teacher_forcing: model_flag() = False
    positions: choice(*POSITIONS, wording=COLON) = "learned"
    relative_window: size() = 16  # model.positions = "relative": distances 0..this - 1 own a bias
    # the bias added to a score is relative_gain x b_rel (b_rel drawn 1/gain as wide): Adam
    # moves a parameter about lr a step, so a gain g lets a preference for a distance grow g
    # times faster (a bias must reach ~5 before a head looks at one key of dozens)
    relative_gain: number(0, None, lo_open=True, wording=COLON,
                          message="must be a positive number (the factor on b_rel)") = 1.0
    # with relative positions, each score also gets q . W_rel[head, distance] (a learned key per
    # head and distance: where a head looks can depend on the query's content, DeBERTa's
    # content-to-position term, which seed 002's relative positions have)
    relative_content: model_flag() = False
    normalization: choice(*NORMALIZATION, wording=COLON) = "none"
    init_std: number(0, None, lo_open=True, message="must be positive", wording=COLON,
                     type_message="must be a number") | None = None  # fmt: skip
    dtype: choice(*DTYPE_NAMES, wording=COLON) = "float32"
    act_fn: choice(*ACTIVATION_NAMES, wording=COLON) = "relu"
    attention: choice(*ATTENTION_KINDS, wording=COLON) = "softmax"
    d_vocab: size() | None = None
    d_vocab_out: size() | None = None
    n_ctx: size() | None = None

    # fields a saved config.toml holds only when they differ from their default (added after
    # runs were saved: their config.toml files stay byte for byte as they were)
    __omit_default__ = ("attention", "teacher_forcing", "positions", "relative_window",
                        "relative_gain", "normalization", "relative_content",
                        "corrupted_batches", "corruption_scope")

    def __post_init__(self) -> None:
        if self.d_head is None and self.d_model % self.n_heads:
            raise ConfigError(
                f"model.n_heads: {self.n_heads} heads do not divide d_model = {self.d_model}; "
                "set model.d_head (each head's width)"
            )
        if self.attention != "softmax" and self.n_heads < 2:
            raise ConfigError(
                f"model.attention = {self.attention!r} normalises each score across the heads: "
                f"with model.n_heads = {self.n_heads} every score becomes its sign; set "
                "model.n_heads >= 2 (or model.attention = 'softmax')"
            )
        _check_recurrence(self)
        if self.relative_content and self.positions != "relative":
            raise ConfigError(
                "model.relative_content = true adds a key per distance to the relative "
                "positions' scores; it needs model.positions = 'relative' (or "
                "model.relative_content = false)"
            )
        if self.relative_gain != 1.0 and self.positions != "relative":
            raise ConfigError(
                f"model.relative_gain = {self.relative_gain} scales the relative positions' bias; "
                "it needs model.positions = 'relative' (or model.relative_gain = 1)"
            )

    @property
    def recurrent(self) -> bool:
        """Whether the blocks are one block applied T times (model.recurrence)."""
        return self.recurrence != "none"

    # -- derived values ---------------------------------------------------------------------

    @property
    def d_head_(self) -> int:
        """The head width in use (`d_head`, or `d_model // n_heads` when unset)."""
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    @property
    def init_std_(self) -> float:
        """The init std in use (`init_std`, or TransformerLens's `0.8 / sqrt(d_model)`)."""
        return 0.8 / math.sqrt(self.d_model) if self.init_std is None else self.init_std

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch_dtype(self.dtype)

    @property
    def paper_layout(self) -> bool:
        """Learned positions and no normalization: what the answer-only kernel
        (empirical.model.fast) and `light_forward` compute; other models read the full forward."""
        return self.positions == "learned" and self.normalization == "none"

    @property
    def is_complete(self) -> bool:
        return None not in (self.d_vocab, self.d_vocab_out, self.n_ctx)

    def require_complete(self) -> None:
        for name in ("d_vocab", "d_vocab_out", "n_ctx"):
            if getattr(self, name) is None:
                raise ConfigError(
                    f"model.{name} is not set: fill the task sizes with "
                    "ModelConfig.with_task(p, K, L) (or for_task) before building the model"
                )

    def with_task(self, p: int, K: int, L: int) -> ModelConfig:
        """A copy with d_vocab, d_vocab_out, n_ctx from the task (a conflicting set value is an
        error naming the field) and d_head filled (= d_model // n_heads when unset)."""
        sizes = task_sizes(p, K, L)
        for name, value in sizes.items():
            mine = getattr(self, name)
            if mine is not None and mine != value:
                raise ConfigError(
                    f"model.{name} = {mine} does not match the task (p={p}, K={K}, L={L}) "
                    f"which needs {value}"
                )
        return dataclasses.replace(self, d_head=self.d_head_, **sizes)

    def filled(self) -> ModelConfig:
        """A copy with `d_head` set (= d_model // n_heads when None), as a model uses it."""
        return dataclasses.replace(self, d_head=self.d_head_)

    # -- the device of the model that holds this config (an attribute, never saved) ---------

    @property
    def device(self) -> torch.device:
        """The device of the model built from this config (CPU until it is moved)."""
        return self.__dict__.get("_device") or _torch().device("cpu")

    @device.setter
    def device(self, value: str | torch.device | None) -> None:
        self.__dict__["_device"] = None if value is None else _torch().device(value)

    @classmethod
    def for_task(cls, p: int, K: int, L: int, **overrides) -> ModelConfig:
        """`ModelConfig(**overrides).with_task(p, K, L)`."""
        return cls(**overrides).with_task(p, K, L)

    def require_one_head(self, what: str) -> None:
        """ConfigError unless n_heads = 1: for the analyses that read the single head."""
        if self.n_heads != 1:
            raise ConfigError(
                f"{what} reads a single attention head per block; this model has "
                f"model.n_heads = {self.n_heads} (use the hooked model: run_with_cache)"
            )

    # -- TransformerLens `cfg` vocabulary (fixed architecture, read-only) ---------------------

    @property
    def mlp_layers(self) -> tuple[int, ...]:
        """Layers (0-indexed) that have an MLP: only the last (the paper's layer 2)."""
        return (self.n_layers - 1,)

    n_key_value_heads = property(lambda self: None)  # no grouped-query attention (= n_heads)
    attn_only = property(lambda self: False)
    @property
    def normalization_type(self) -> str | None:
        """TransformerLens's name: None (no normalization) or "LNPre"."""
        return None if self.normalization == "none" else self.normalization

    @property
    def positional_embedding_type(self) -> str:
        """TransformerLens's name: "standard" (learned W_pos) or "relative" (no W_pos)."""
        return "standard" if self.positions == "learned" else "relative"
    final_rms = property(lambda self: False)
    use_attn_result = property(lambda self: True)

    @property
    def attn_scale(self) -> float:
        """Attention scores are divided by this (TransformerLens: sqrt(d_head))."""
        return math.sqrt(self.d_head_)
