"""`ModelConfig`: the architecture of the paper's 2-layer, 1-head transformer as a typed dataclass.

The fields are what a run may change (widths, init scale, dtype); the task-derived sizes
(`d_vocab`, `d_vocab_out`, `n_ctx`) and `d_head` default to `None` so the config can sit in a
run config before the task is known, and are filled by `with_task(p, K, L)` /
`for_task(p, K, L)` (`d_head` = `d_model` unless set), so a built model's `cfg.d_head` is an int.
The architecture itself (2 layers, 1 head, MLP only in layer 2, no biases, no normalization)
is fixed, and exposed read-only under TransformerLens's `cfg` names (`n_layers`, `n_heads`,
`attn_only`, `normalization_type`, ...) so `ActivationCache`'s helpers and
`transformer_lens.patching` can read it. `cfg.device` (not a field: never saved) is the device
of the model that holds the config, kept up to date by the model.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import torch

from empirical.config_io import ConfigError

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}


def task_sizes(p: int, K: int, L: int) -> dict[str, int]:
    """`d_vocab`, `d_vocab_out`, `n_ctx` for the task's token layout.

    Ids 0..p-1 are numbers, p..p+K-1 variables, then `+`, `=`, `pad` (layout of empirical.task);
    the output classes are the numbers 0..p-1; a sequence has L tokens.
    """
    for name, value in (("p", p), ("K", K), ("L", L)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"task size {name} must be a positive integer, got {value!r}")
    return {"d_vocab": p + K + 3, "d_vocab_out": p, "n_ctx": L}


@dataclass
class ModelConfig:
    """Architecture of the 2-layer, 1-head, layer-2-MLP-only transformer (paper Section 3).

    d_model: residual width (128, ours). d_head: the single head's width (None: d_model; filled
    by `with_task`, so a built model's `cfg.d_head` is an int).
    d_mlp: layer-2 MLP width (512, ours). init_std: std of every weight's normal init (None:
    TransformerLens's `0.8 / sqrt(d_model)`, i.e. 0.0707 at d_model = 128). dtype: parameters'.
    d_vocab / d_vocab_out / n_ctx: input vocabulary, output classes, context length; None until
    filled from the task by `with_task` (p + K + 3, p, L).

    `device` is an attribute, not a field (it is never saved): the device of the model built
    from this config, which the model keeps current (TransformerLens reads `cfg.device`).
    """

    d_model: int = 128
    d_head: int | None = None
    d_mlp: int = 512
    init_std: float | None = None
    dtype: Literal["float32", "float64"] = "float32"
    d_vocab: int | None = None
    d_vocab_out: int | None = None
    n_ctx: int | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "d_mlp", "d_head", "d_vocab", "d_vocab_out", "n_ctx"):
            value = getattr(self, name)
            if value is None and name not in ("d_model", "d_mlp"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"model.{name}: must be a positive integer, got {value!r}")
        if self.init_std is not None:
            if isinstance(self.init_std, bool) or not isinstance(self.init_std, (int, float)):
                raise ConfigError(f"model.init_std: must be a number, got {self.init_std!r}")
            if not (math.isfinite(self.init_std) and self.init_std > 0):
                raise ConfigError(f"model.init_std: must be positive, got {self.init_std!r}")
            self.init_std = float(self.init_std)
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype: {self.dtype!r} is not one of {list(DTYPES)}")

    # -- derived values ---------------------------------------------------------------------

    @property
    def d_head_(self) -> int:
        """The head width in use (`d_head`, or `d_model` when unset)."""
        return self.d_model if self.d_head is None else self.d_head

    @property
    def init_std_(self) -> float:
        """The init std in use (`init_std`, or TransformerLens's `0.8 / sqrt(d_model)`)."""
        return 0.8 / math.sqrt(self.d_model) if self.init_std is None else self.init_std

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

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
        error naming the field) and d_head filled (= d_model when unset)."""
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
        """A copy with `d_head` set (= d_model when None), as a model uses it."""
        return dataclasses.replace(self, d_head=self.d_head_)

    # -- the device of the model that holds this config (an attribute, never saved) ---------

    @property
    def device(self) -> torch.device:
        """The device of the model built from this config (CPU until it is moved)."""
        return self.__dict__.get("_device") or torch.device("cpu")

    @device.setter
    def device(self, value: str | torch.device | None) -> None:
        self.__dict__["_device"] = None if value is None else torch.device(value)

    @classmethod
    def for_task(cls, p: int, K: int, L: int, **overrides) -> ModelConfig:
        """`ModelConfig(**overrides).with_task(p, K, L)`."""
        return cls(**overrides).with_task(p, K, L)

    # -- TransformerLens `cfg` vocabulary (fixed architecture, read-only) ---------------------

    @property
    def n_layers(self) -> int:
        return 2

    @property
    def n_heads(self) -> int:
        return 1

    @property
    def mlp_layers(self) -> tuple[int, ...]:
        """Layers (0-indexed) that have an MLP: only the second."""
        return (1,)

    @property
    def n_key_value_heads(self) -> None:
        """No grouped-query attention (TransformerLens: None = n_heads)."""
        return None

    @property
    def attn_only(self) -> bool:
        return False

    @property
    def normalization_type(self) -> None:
        return None

    @property
    def act_fn(self) -> str:
        return "relu"

    @property
    def positional_embedding_type(self) -> str:
        return "standard"

    @property
    def final_rms(self) -> bool:
        return False

    @property
    def use_attn_result(self) -> bool:
        return True

    @property
    def attn_scale(self) -> float:
        """Attention scores are divided by this (TransformerLens: sqrt(d_head))."""
        return math.sqrt(self.d_head_)
