"""Held-out value pairs (unordered or ordered, see AssignAddTask.held_out_form) and the seeds
derived from a run's seed."""

from __future__ import annotations

import hashlib
import random

import torch

from empirical.task.assign_add.config import AssignAddTask, train_pair_ranks


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed for one purpose (`"held_out"`, `"train"`, `"eval", name`) of a run seed:
    independent purposes get independent streams."""
    text = "/".join([str(int(seed))] + [str(t) for t in tags])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def cpu_generator(seed: int, *tags: object) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(derive_seed(seed, *tags))


def training_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator a run with `seed` draws its training batches from, on `device`."""
    return torch.Generator(device=torch.device(device)).manual_seed(derive_seed(seed, "train"))


def _ordered_table(ranks: torch.Tensor, p: int) -> torch.Tensor:
    """(n, 2) rows (x, y) of sorted ordered ranks x*p + y."""
    ranks = ranks.reshape(-1).long()
    return torch.stack([ranks // p, ranks % p], dim=1)


def read_train_pairs_file(cfg: AssignAddTask) -> torch.Tensor:
    """Sorted ranks n1*p + n2 of the ordered training pairs listed in cfg.train_pairs_file
    (empirical.task.assign_add.config.train_pair_ranks reads and checks the file)."""
    return torch.tensor(train_pair_ranks(cfg), dtype=torch.long)


def complement(ranks: torch.Tensor, n: int) -> torch.Tensor:
    """The sorted ranks 0..n-1 not in `ranks` (e.g. the pairs a held-out table leaves)."""
    keep = torch.ones(n, dtype=torch.bool)
    keep[ranks] = False
    return keep.nonzero().reshape(-1)


def held_out_pairs(cfg: AssignAddTask, seed: int) -> torch.Tensor:
    """The held-out value pairs of this seed: LongTensor (n, 2), deterministic, on the CPU.
    "unordered": rows x <= y, a uniform subset of cfg.n_held_out of the p(p+1)/2 pairs {x, y};
    "ordered": pairs (x, y) sorted by x*p + y, every pair train_pairs_file does not list, a
    uniform subset of the p*p ("seeded"), or the complement of the authors' random.Random(
    pair_seed).sample of training pairs ("python_random"; docs/task.md)."""
    p, ordered = cfg.p, cfg.held_out_form == "ordered"
    if ordered and cfg.train_pairs_file:
        return _ordered_table(complement(read_train_pairs_file(cfg), p * p), p)
    if ordered and cfg.pair_split == "python_random":
        rng = random.Random(int(seed) if cfg.pair_seed is None else cfg.pair_seed)
        # sample() picks positions independently of the items, so sampling range(p*p)
        # gives the row-major ranks of sampling the list of tuples (n1, n2), same draw
        train = torch.tensor(rng.sample(range(p * p), cfg.n_train_ordered), dtype=torch.long)
        return _ordered_table(complement(train, p * p), p)
    n = cfg.n_held_out
    if n == 0:
        return torch.zeros((0, 2), dtype=torch.long)
    if ordered:
        pick = torch.randperm(p * p, generator=cpu_generator(seed, "held_out"))[:n]
        return _ordered_table(pick.sort().values, p)
    rows, cols = torch.triu_indices(cfg.p, cfg.p)
    pick = torch.randperm(cfg.n_pairs, generator=cpu_generator(seed, "held_out"))[:n]
    pick = pick.sort().values  # triu order is lexicographic in (x, y)
    return torch.stack([rows[pick], cols[pick]], dim=1).long()


def check_held_out(cfg: AssignAddTask, held: torch.Tensor) -> torch.Tensor:
    """Validate a held-out table and return it canonical: (n, 2) long, unique, sorted; with
    held_out_form "unordered" rows become x <= y, "ordered" rows are kept as they are."""
    held = torch.as_tensor(held).detach().to("cpu", torch.long)
    if held.numel() == 0:
        return torch.zeros((0, 2), dtype=torch.long)
    if held.dim() != 2 or held.shape[1] != 2:
        raise ValueError(f"held-out pairs must have shape (n, 2), got {tuple(held.shape)}")
    if bool(((held < 0) | (held >= cfg.p)).any()):
        raise ValueError(f"held-out pairs must hold numbers in 0..{cfg.p - 1}")
    # unique and sorted via 1-D ranks (unique(dim=0) is slow on the CPU)
    x, y = held[:, 0], held[:, 1]
    if cfg.held_out_form == "ordered":
        ranks = torch.unique(x * cfg.p + y)
        if ranks.numel() >= cfg.p * cfg.p:
            raise ValueError("the held-out pairs leave no training pair")
        return _ordered_table(ranks, cfg.p)
    held = _ordered_table(torch.unique(torch.minimum(x, y) * cfg.p + torch.maximum(x, y)), cfg.p)
    if held.shape[0] >= cfg.n_pairs:
        raise ValueError("the held-out pairs leave no training pair")
    return held


def ordered_ranks(held: torch.Tensor, p: int, form: str = "unordered") -> torch.Tensor:
    """Sorted ranks x*p + y of every ordered pair (x, y) the table holds out: form
    "unordered" both (x, y) and (y, x) of each row (diagonal once), "ordered" the rows."""
    if held.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    x, y = held[:, 0], held[:, 1]
    if form == "ordered":
        return torch.unique(x * p + y)
    if form != "unordered":
        raise ValueError(f"form must be 'unordered' or 'ordered', got {form!r}")
    ranks = torch.cat([x * p + y, y * p + x])
    return torch.unique(ranks)  # sorted, diagonal once


def diagonal_values(held: torch.Tensor) -> torch.Tensor:
    """Sorted x with {x, x} (equally (x, x)) held out; the same for either form."""
    if held.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    diag = held[held[:, 0] == held[:, 1], 0]
    return torch.unique(diag)


def is_held(
    pairs: torch.Tensor, held: torch.Tensor, p: int | AssignAddTask, form: str | None = None
) -> torch.Tensor:
    """Bool (n,): whether each ordered pair (x, y) in `pairs` (n, 2) is held out. `p`: the
    modulus or the task config (which then gives the form); form "unordered" (default for an
    integer p): if {x, y} is held out, "ordered": if (x, y) is a row of `held`."""
    if not isinstance(p, int):  # an AssignAddTask
        form = p.held_out_form if form is None else form
        p = p.p
    ranks = ordered_ranks(held.cpu(), p, form or "unordered").to(pairs.device)
    if ranks.numel() == 0:
        return torch.zeros(pairs.shape[0], dtype=torch.bool, device=pairs.device)
    r = pairs[:, 0] * p + pairs[:, 1]
    idx = torch.searchsorted(ranks, r).clamp(max=ranks.numel() - 1)
    return ranks[idx] == r
