"""Evaluation sets: fixed per seed, built on the CPU (identical whatever the device) by the
config's family, saved with the run as one file (`save_eval_sets`, `load_eval_sets`); a set
that cannot exist for the config is left out of the dict (docs/task.md, "Evaluation sets").
"""

from __future__ import annotations

import io
import os

import torch

from disentangled.errors import UserError
from empirical.config.io import fingerprint_of, load_failure, non_default_fields, to_dict
from empirical.report.files import atomic_write_bytes
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig, task_config
from empirical.task.pairs import check_held_out
from empirical.task.registry import family_of

FORMAT = "assign-and-add-eval-sets/1"


def eval_set_names(cfg: TaskConfig) -> tuple[str, ...]:
    """The names of cfg's evaluation sets, in a fixed order (those a config cannot have are
    later left out): its family's."""
    return family_of(cfg).eval_set_names(cfg)


class EvalSetsError(UserError, ValueError):
    """An evaluation-set file that cannot be read, or that belongs to another task or seed."""


def task_fingerprint(cfg: TaskConfig, seed: int) -> str:
    """The identity of a seed's evaluation sets: sha256 of the [task] table and the seed,
    all they depend on (saved in eval_sets.pt, checked when a run loads it). The task's
    fields are those that differ from the default task's (its family's own: from their
    defaults), as in the run's config_fingerprint."""
    return fingerprint_of({"task": non_default_fields(cfg, task_config()), "seed": int(seed)})


class EvalSets(dict):
    """dict[str, Batch] plus what produced it: held_out (n, 2), seed, config (a dict), per
    set whether it enumerates its whole support (`enumerated`), and the task_fingerprint of
    the task and seed (None in files written before it existed)."""

    def __init__(
        self, *args, held_out=None, seed=None, config=None, enumerated=None, fingerprint=None,
        **kw,
    ):  # fmt: skip
        super().__init__(*args, **kw)
        self.held_out = held_out
        self.seed = seed
        self.config = config
        self.enumerated = dict(enumerated or {})
        self.fingerprint = fingerprint

    def to(self, device) -> EvalSets:
        meta = ("held_out", "seed", "config", "enumerated", "fingerprint")
        return EvalSets({k: v.to(device) for k, v in self.items()},
                        **{name: getattr(self, name) for name in meta})  # fmt: skip


def eval_sets_mismatch(sets: EvalSets, cfg: TaskConfig, seed: int) -> str | None:
    """Why `sets` are not the evaluation sets of (cfg, seed); None: they are, or an older
    file records too little to tell (only a difference it records is refused)."""
    fingerprint = getattr(sets, "fingerprint", None)
    expected = task_fingerprint(cfg, seed) if fingerprint else None
    if fingerprint and fingerprint == expected:
        return None
    if getattr(sets, "seed", None) is not None and int(sets.seed) != int(seed):
        return f"they were built for seed {sets.seed}, this run's seed is {seed}"
    if fingerprint:
        return (
            f"they were built for another [task] table (task fingerprint "
            f"{str(fingerprint)[:12]}, this run's {expected[:12]})"
        )
    saved = getattr(sets, "config", None)
    if isinstance(saved, dict):
        mine = to_dict(cfg)
        differ = [k for k in saved if k in mine and saved[k] != mine[k]]
        if differ:
            shown = ", ".join(f"task.{k}" for k in differ[:4])
            return f"they were built for another [task] table ({shown} differ)"
    return None


def build_eval_set(
    cfg: TaskConfig, seed: int, name: str, device="cpu", held_out: torch.Tensor | None = None
) -> tuple[Batch, bool] | None:
    """One evaluation set: (Batch, enumerated whole support?), or None if it cannot exist.

    `name` is one of the family's set names (assign_add: also an optional Figure 3 set,
    whether or not the config lists it); held_out: the seed's held-out pairs (default: the
    family's `held_out(cfg, seed)`)."""
    family = family_of(cfg)
    held = family.held_out(cfg, seed) if held_out is None else check_held_out(cfg, held_out)
    built = family.build_eval_set(cfg, seed, name, held)
    return None if built is None else (built[0].to(device), built[1])


def build_eval_sets(cfg: TaskConfig, seed: int, device="cpu") -> EvalSets:
    """All evaluation sets of this seed, deterministic (built on the CPU, then moved), in the
    order of eval_set_names(cfg)."""
    held = family_of(cfg).held_out(cfg, seed)
    out = EvalSets(
        held_out=held, seed=int(seed), config=to_dict(cfg), fingerprint=task_fingerprint(cfg, seed)
    )
    for name in eval_set_names(cfg):
        built = build_eval_set(cfg, seed, name, device, held_out=held)
        if built is not None:
            out[name], out.enumerated[name] = built
    return out


def save_eval_sets(sets: dict[str, Batch], path: str | os.PathLike, held_out=None) -> None:
    """One .pt file (tensors stored as int16), written atomically."""
    held = getattr(sets, "held_out", None) if held_out is None else held_out
    payload = {
        "format": FORMAT,
        "sets": {
            name: {f: getattr(b, f).detach().to("cpu", torch.int16) for f in b.fields}
            for name, b in sets.items()
        },
        "held_out": None if held is None else torch.as_tensor(held).to("cpu", torch.long),
        "seed": getattr(sets, "seed", None),
        "config": getattr(sets, "config", None),
        "enumerated": dict(getattr(sets, "enumerated", {}) or {}),
        "fingerprint": getattr(sets, "fingerprint", None),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_eval_sets(path: str | os.PathLike, device="cpu") -> EvalSets:
    """The EvalSets saved at `path`; an EvalSetsError (a ValueError) names a file that is not
    one (garbage, truncated, another format)."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # any unreadable file: one clear message
        raise EvalSetsError(
            f"{path}: not an evaluation-set file (corrupt or truncated: {load_failure(exc)})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise EvalSetsError(f"{path}: not an evaluation-set file (format {FORMAT!r} expected)")
    try:
        sets = {name: Batch.from_dict(d).to(device) for name, d in payload["sets"].items()}
        return EvalSets(
            sets,
            held_out=payload["held_out"],
            seed=payload["seed"],
            config=payload["config"],
            enumerated=payload.get("enumerated", {}),
            fingerprint=payload.get("fingerprint"),
        )
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise EvalSetsError(
            f"{path}: not a complete evaluation-set file ({type(exc).__name__}: {exc})"
        ) from None
