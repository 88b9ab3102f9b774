"""Held-out value pairs and the seeds derived from a run's seed."""

from __future__ import annotations

import hashlib

import torch

from empirical.task.config import TaskConfig


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed for one purpose (`"held_out"`, `"train"`, `"eval", name`) of a run seed.

    Independent purposes get independent streams, so e.g. adding an evaluation set never
    changes the training batches or the other sets.
    """
    text = "/".join([str(int(seed))] + [str(t) for t in tags])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def cpu_generator(seed: int, *tags: object) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(derive_seed(seed, *tags))


def training_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator a run with `seed` draws its training batches from, on `device`."""
    return torch.Generator(device=torch.device(device)).manual_seed(derive_seed(seed, "train"))


def held_out_pairs(cfg: TaskConfig, seed: int) -> torch.Tensor:
    """The held-out unordered pairs of this seed: LongTensor (n, 2), x <= y, sorted rows.

    A uniformly random subset of cfg.n_held_out of the p(p+1)/2 pairs {x, y} (x == y
    included); deterministic per (p, held_out_fraction, seed), on the CPU.
    """
    n = cfg.n_held_out
    if n == 0:
        return torch.zeros((0, 2), dtype=torch.long)
    rows, cols = torch.triu_indices(cfg.p, cfg.p)
    pick = torch.randperm(cfg.n_pairs, generator=cpu_generator(seed, "held_out"))[:n]
    pick = pick.sort().values  # triu order is lexicographic in (x, y)
    return torch.stack([rows[pick], cols[pick]], dim=1).long()


def check_held_out(cfg: TaskConfig, held: torch.Tensor) -> torch.Tensor:
    """Validate a held-out table and return it canonical: (n, 2) long, x <= y, unique, sorted."""
    held = torch.as_tensor(held).detach().to("cpu", torch.long)
    if held.numel() == 0:
        return torch.zeros((0, 2), dtype=torch.long)
    if held.dim() != 2 or held.shape[1] != 2:
        raise ValueError(f"held-out pairs must have shape (n, 2), got {tuple(held.shape)}")
    if bool(((held < 0) | (held >= cfg.p)).any()):
        raise ValueError(f"held-out pairs must hold numbers in 0..{cfg.p - 1}")
    # canonical x <= y, unique, sorted (via 1-D ranks: unique(dim=0) is slow on the CPU)
    x, y = held[:, 0], held[:, 1]
    ranks = torch.unique(torch.minimum(x, y) * cfg.p + torch.maximum(x, y))
    held = torch.stack([ranks // cfg.p, ranks % cfg.p], dim=1)
    if held.shape[0] >= cfg.n_pairs:
        raise ValueError("the held-out pairs leave no training pair")
    return held


def ordered_ranks(held: torch.Tensor, p: int) -> torch.Tensor:
    """Sorted ranks x*p + y of every ordered pair (x, y) whose {x, y} is held out."""
    if held.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    x, y = held[:, 0], held[:, 1]
    ranks = torch.cat([x * p + y, y * p + x])
    return torch.unique(ranks)  # sorted, diagonal once


def diagonal_values(held: torch.Tensor) -> torch.Tensor:
    """Sorted x with {x, x} held out."""
    if held.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    diag = held[held[:, 0] == held[:, 1], 0]
    return torch.unique(diag)


def is_held(pairs: torch.Tensor, held: torch.Tensor, p: int) -> torch.Tensor:
    """Bool (n,): whether each ordered pair (x, y) in `pairs` (n, 2) has {x, y} held out."""
    ranks = ordered_ranks(held.cpu(), p).to(pairs.device)
    if ranks.numel() == 0:
        return torch.zeros(pairs.shape[0], dtype=torch.bool, device=pairs.device)
    r = pairs[:, 0] * p + pairs[:, 1]
    idx = torch.searchsorted(ranks, r).clamp(max=ranks.numel() - 1)
    return ranks[idx] == r
