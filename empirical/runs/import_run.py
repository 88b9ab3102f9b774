"""Turn checkpoints saved by TransformerLens (the paper authors' run) into an ordinary run
directory, so that `evaluate`, `analyze`, `compare-qk` work on it as on a run we trained.

    from empirical.runs.import_run import import_checkpoints
    result = import_checkpoints("../shared/authors/checkpoints", "configs/authors.toml",
                                "runs/authors", train_pairs="../shared/authors/train_pairs.json")

The run directory gets config.toml, snapshots/step_XXXXXX.pt at every imported step,
eval_sets.pt and imported.json (provenance: source, each file's step and sha256, the token
map, the conversion check, date, command); no checkpoints/last.pt. Nothing is written until
every file is read, converted (empirical.model.tl_import) and checked; the directory is built
next to `out` and renamed into place, under `out`'s writer lock (carried across the rename).
An existing `out` is replaced only if it is an earlier import of the same source folder, an
empty directory, or `overwrite`. docs/import.md.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from disentangled.command_line import UsageError, check_writable_dir
from empirical.config.io import ConfigError, config_to_toml
from empirical.model.checkpoint import CheckpointError, save_model
from empirical.model.config import ModelConfig
from empirical.model.tl_import import (
    FINAL_NAME,
    convert_tl_state_dict,
    is_checkpoint_name,
    read_tl_state_dict,
    step_from_name,
    tl_reference_forward,
    to_their_tokens,
    token_map,
)
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.config import RunConfig, config_fingerprint, load_run_config
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import build_eval_sets, save_eval_sets
from empirical.task.pairs import held_out_pairs, ordered_ranks, read_train_pairs_file

FORMAT = "assign-and-add-import/1"
# sequences per evaluation set on which each converted model is compared with a direct
# forward of the source state dict
CHECK_PER_SET = 8
# the converted float32 model must match the float64 reference forward to this fraction of
# the largest |logit| (float32 rounding gives ~2e-6 on the authors' checkpoints)
CHECK_RTOL = 1e-4


@dataclass
class SourceFile:
    path: Path
    step: int
    sha256: str = ""
    max_logit_diff: float = 0.0


@dataclass
class ImportResult:
    out: Path
    steps: list[int]
    files: list[SourceFile] = field(default_factory=list)
    seconds: float = 0.0
    replaced: bool = False


def source_files(src: str | os.PathLike, final_step: int) -> list[SourceFile]:
    """The checkpoint files of a source folder (every *.pth / *.pt), sorted by step; a file
    whose name has no step, or two files with one step, is a CheckpointError."""
    src = Path(src)
    if not src.exists():
        raise CheckpointError(f"{src}: no such folder (the folder of checkpoint_step_N.pth files)")
    if not src.is_dir():
        raise CheckpointError(f"{src}: not a folder (give the folder of checkpoint_step_N.pth)")
    paths = sorted(p for p in src.iterdir() if p.is_file() and is_checkpoint_name(p))
    files = [SourceFile(path, step_from_name(path, final_step)) for path in paths]
    if not files:
        raise CheckpointError(f"{src}: holds no checkpoint (*.pth or *.pt) file")
    files.sort(key=lambda f: f.step)
    for a, b in zip(files, files[1:], strict=False):
        if a.step == b.step:
            final = FINAL_NAME in (a.path.name, b.path.name)
            hint = " (pass --final-step for the final model)" if final else ""
            raise CheckpointError(
                f"{src}: {a.path.name} and {b.path.name} are both step {a.step}{hint}"
            )
    return files


def check_train_pairs(cfg: RunConfig, path: str | os.PathLike) -> dict:
    """Refuse (ConfigError) unless the config's held-out pairs are exactly the ordered pairs
    that the JSON file at `path` does not list for training; returns a provenance record."""

    task, p = cfg.task, cfg.task.p
    try:
        as_file = dataclasses.replace(task, train_pairs_file=str(path), held_out_form="ordered")
        trained = read_train_pairs_file(as_file)
    except ConfigError as exc:
        raise ConfigError(f"--train-pairs {path}: {exc}") from exc
    file_held = torch.ones(p * p, dtype=torch.bool)
    file_held[trained] = False
    cfg_held = torch.zeros(p * p, dtype=torch.bool)
    cfg_held[ordered_ranks(held_out_pairs(task, cfg.seed), p, task.held_out_form)] = True
    only_cfg = int((cfg_held & ~file_held).sum())
    only_file = int((file_held & ~cfg_held).sum())
    if only_cfg or only_file:
        raise ConfigError(
            f"--train-pairs {path}: the config's held-out pairs differ from the pairs the file "
            f"leaves out of training in {only_cfg + only_file} ordered pairs ({only_cfg} held "
            f"out by the config but trained in the file, {only_file} held out by the file but "
            f"trained by the config); to use the file's split, add the override "
            f"task.train_pairs_file={path}"
        )
    return {
        "path": str(Path(path).resolve()),
        "sha256": _sha256(Path(path).read_bytes()),
        "train_pairs": int(trained.numel()),
        "held_out_pairs": int(file_held.sum()),
        "matches_config": True,
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _refuse_existing(out: Path, src: Path, overwrite: bool) -> bool:
    """Whether `out` exists and will be replaced; a UsageError if it may not be."""
    if not out.exists():
        for parent in out.parents:
            if parent.exists() and not parent.is_dir():
                raise UsageError(f"--out {out}: lies under {parent}, which is a file")
        return False
    if not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a directory path")
    if overwrite or all(p.name == RunDir.WRITER_LOCK for p in out.iterdir()):
        return True
    try:
        earlier = RunDir(out).read_imported()
    except (OSError, ValueError):
        earlier = None
    if earlier and earlier.get("source") == str(src.resolve()):
        return True
    if earlier:
        what = f"an import of {earlier.get('source')}"
    else:
        what = "a run directory" if RunDir(out).is_run() else "files"
    raise UsageError(
        f"--out {out}: already holds {what}, not an earlier import of {src.resolve()}; "
        "choose another --out or pass --overwrite to replace it"
    )


def import_checkpoints(
    src: str | os.PathLike, config: str | os.PathLike | RunConfig, out: str | os.PathLike, *,
    overrides: list[str] | None = None, train_pairs: str | os.PathLike | None = None,
    final_step: int | None = None, overwrite: bool = False, command: str | None = None,
    progress: bool = False,
) -> ImportResult:  # fmt: skip
    """Import every checkpoint of the folder `src` into the run directory `out` (see the
    module docstring). `config`: a RunConfig or the path of a run config (with `overrides`);
    `final_step`: the step of model_state_dict.pth, an integer >= 0 (default: the config's
    train.steps; `import-checkpoints --final-step`, empirical.runs.options.ImportOptions)."""
    t0 = time.perf_counter()
    src, out = Path(src), Path(out)
    given = isinstance(config, RunConfig)
    cfg = config if given else load_run_config(config, overrides)
    config_source = "<RunConfig>" if given else str(Path(config).resolve())
    if cfg.task.train_pairs_file:
        resolved = str(Path(cfg.task.train_pairs_file).resolve())
        cfg = dataclasses.replace(
            cfg, task=dataclasses.replace(cfg.task, train_pairs_file=resolved)
        )
    model_cfg: ModelConfig = cfg.built_model_config()
    final = cfg.train.steps if final_step is None else final_step

    # every check before anything is written
    replaced = _refuse_existing(out, src, overwrite)
    nearest = out.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    check_writable_dir(nearest, f"--out {out}: its parent")  # the import is built there
    files = source_files(src, final)
    pairs_record = check_train_pairs(cfg, train_pairs) if train_pairs is not None else None
    with writer_lock(out, "--out") as lock:  # `out` checked again, under its writer lock
        replaced = _refuse_existing(out, src, overwrite) and not lock.created
        models, sets, tokens = _convert_and_check(files, cfg, model_cfg, progress)
        record = _provenance(
            src, files, cfg, config_source, overrides, final, pairs_record, len(tokens), command
        )
        _write_run_directory(out, cfg, sets, files, models, record, lock)
    seconds = time.perf_counter() - t0
    return ImportResult(out, [f.step for f in files], files, seconds, replaced)


def _convert_and_check(files: list[SourceFile], cfg: RunConfig, model_cfg: ModelConfig, progress):
    """Every source file read (sha256 kept) and converted to our model, each conversion
    checked against a direct forward of the source state dict on a few evaluation sequences
    of every set. Returns (models, evaluation sets, the sequences checked)."""

    p, K = cfg.task.p, cfg.task.K
    models: list[AssignAddTransformer] = []
    state_dicts = []
    for f in tqdm(files, desc="convert", disable=not progress, leave=False):
        data = f.path.read_bytes()
        f.sha256 = _sha256(data)
        sd = read_tl_state_dict(f.path, data=data)
        models.append(convert_tl_state_dict(sd, model_cfg, p, K, where=str(f.path)))
        state_dicts.append(sd)

    sets = build_eval_sets(cfg.task, cfg.seed, device="cpu")
    tokens = torch.cat([b.tokens[:CHECK_PER_SET] for b in sets.values()])  # a few of each set
    theirs = to_their_tokens(tokens, p, K)
    for f, model, sd in zip(files, models, state_dicts, strict=True):
        ref = tl_reference_forward(sd, theirs)[:, -1]
        with torch.no_grad():
            got = model.forward_fast(tokens).double()
        f.max_logit_diff = float((got - ref).abs().max())
        scale = max(1.0, float(ref.abs().max()))
        if not f.max_logit_diff <= CHECK_RTOL * scale:  # a conversion bug, never a user error
            raise RuntimeError(
                f"{f.path}: converted logits differ from the source's own forward by "
                f"{f.max_logit_diff:.3g} (largest |logit| {scale:.3g})"
            )
    del state_dicts
    return models, sets, tokens


def _provenance(
    src, files, cfg, config_source, overrides, final, pairs_record, n_checked, command
) -> dict:
    """imported.json: where the run comes from and how it was converted."""
    return {
        "format": FORMAT,
        "source": str(src.resolve()),
        "source_format": "TransformerLens HookedTransformer state dict (the paper authors')",
        "config": config_source,
        "overrides": list(overrides or []),
        "final_step": final,
        "files": [
            {
                "file": f.path.name,
                "step": f.step,
                "sha256": f.sha256,
                "max_abs_logit_diff": f.max_logit_diff,
            }
            for f in files
        ],
        "token_map": token_map(cfg.task.p, cfg.task.K),
        "conversion": (
            "embed.W_E rows permuted from their ids to ours; every other weight copied; every "
            "bias and the block-0 MLP checked zero; logits checked against a direct forward "
            f"of each source file on {n_checked} evaluation sequences"
        ),
        "train_pairs": pairs_record,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command if command is not None else " ".join(sys.argv),
    }


def _write_run_directory(out: Path, cfg, sets, files, models, record: dict, lock) -> None:
    """Build the run directory next to `out` and rename it into place, keeping `out`'s
    writer lock held across the rename (the lock is carried into the new directory)."""

    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.import-"))
    try:
        run = RunDir(tmp)
        run.config.write_text(config_to_toml(cfg))
        save_eval_sets(sets, run.eval_sets)
        run.snapshots_dir.mkdir()
        fingerprint = config_fingerprint(cfg)
        for f, model in zip(files, models, strict=True):
            extra = {"step": f.step, "imported_from": f.path.name}
            save_model(model, run.snapshot(f.step), {**extra, "config_fingerprint": fingerprint})
        run.imported.write_text(json.dumps(record, indent=2) + "\n")
        lock.carry_into(tmp)
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename `tmp` to `out`; an existing `out` is moved aside first and removed after."""
    if not out.exists():
        os.rename(tmp, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
    os.rmdir(old)
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
