"""The training sampler of a task config, whatever its family (built by
`family_of(cfg).training_sampler`), cached per (config, held-out pairs, device):
`get_training_sampler`, and `sample_training_batch` (a batch drawn with it).
"""

from __future__ import annotations

import weakref

import torch

from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import check_held_out
from empirical.task.registry import family_of


def training_sampler(cfg: TaskConfig, held_out: torch.Tensor, device="cpu"):
    """A new training sampler of cfg's family: `.sample(n, generator) -> Batch`."""
    return family_of(cfg).training_sampler(cfg, check_held_out(cfg, held_out), device)


def run_training_sampler(cfg: TaskConfig, seed: int, device="cpu"):
    """The training sampler of a run with `seed`: its family's, with the seed's held-out data."""
    family = family_of(cfg)
    return family.training_sampler(cfg, family.held_out(cfg, seed), device)


_SAMPLERS: dict[tuple, object] = {}
# (config, id, version, device) -> (weak reference to the held-out object, sampler key)
_FAST_KEYS: dict[tuple, tuple[weakref.ref | None, tuple]] = {}


def get_training_sampler(cfg: TaskConfig, held_out: torch.Tensor, device="cpu"):
    """A cached training sampler of cfg's family for (config, held-out pairs, device)."""
    device = torch.device(device)
    # The same held-out tensor object, unmodified, maps straight to its sampler. An id alone
    # is not enough: Python reuses the id of a freed tensor for a new one, so the entry also
    # holds a weak reference that must still point at this very object.
    fast = (repr(cfg), id(held_out), getattr(held_out, "_version", None), str(device))
    ref, key = _FAST_KEYS.get(fast, (None, None))
    if ref is None or ref() is not held_out or key not in _SAMPLERS:
        held = check_held_out(cfg, held_out)
        key = (fast[0], held.numpy().tobytes(), fast[3])
        if key not in _SAMPLERS:
            if len(_SAMPLERS) >= 8:
                _SAMPLERS.pop(next(iter(_SAMPLERS)))
            _SAMPLERS[key] = family_of(cfg).training_sampler(cfg, held, device)
        if len(_FAST_KEYS) >= 64:
            _FAST_KEYS.clear()
        try:
            ref = weakref.ref(held_out)
        except TypeError:  # a list or other object without weak references: check every call
            ref = None
        _FAST_KEYS[fast] = (ref, key)
    return _SAMPLERS[key]


def sample_training_batch(cfg: TaskConfig, n: int, generator: torch.Generator, device=None,
                          held_out: torch.Tensor | None = None) -> Batch:  # fmt: skip
    """n training sequences drawn on the fly with the cached family sampler. held_out is
    required: held_out_pairs(cfg, seed), or an empty (0, 2) tensor to hold nothing out.
    device defaults to the generator's device."""
    if held_out is None:
        raise ValueError(
            "sample_training_batch needs held_out=held_out_pairs(cfg, seed) "
            "(or torch.zeros((0, 2), dtype=torch.long) to hold nothing out)"
        )
    device = generator.device if device is None else torch.device(device)
    return get_training_sampler(cfg, held_out, device).sample(n, generator)
