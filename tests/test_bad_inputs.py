"""Every bad input and file-system fault we know of, one table: each case must end with exit
status 2 and exactly one stderr line `error: ...` naming the path or value (`needle`), no
traceback, and every file that existed before unchanged (bytes and mtime) with none added.

Cases run in-process through the entry points' `main(argv)` (the same code as `python -m`),
a few as real `python -m` subprocesses. Placeholders in argv: {run} a copy of a trained
smoke run, {other} a run of another seed, {tmp} the test's directory, {file} a regular
file, {ro} a read-only directory (a read-only tmpfs when run as root), {smoke} the smoke
config. `held`: a directory whose writer lock another (forked) process holds during the
case (tests/lock_holder.py); its lock file must be left as it was too.

`python tests/test_bad_inputs.py` prints the table of docs/robustness.md from CASES and
CORRECT_RESULTS (the cases whose right outcome is a result, tested in test_robustness.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lock_holder import held_elsewhere

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TINY = ["task.eval_size=200", "train.steps=40"]


# -- the fixtures: trained runs, a file, a read-only directory ------------------------------


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def trained(tmp_path_factory):
    """Two finished smoke runs (seed 0 and seed 1), 40 steps, checkpoints and snapshots at
    0, 20, 40 (trained once per module, copied per test)."""
    from empirical.runs.config import load_run_config
    from empirical.train.loop import train_run

    base = tmp_path_factory.mktemp("trained")
    for seed in (0, 1):
        cfg = load_run_config(SMOKE, [*TINY, f"seed={seed}"])
        train_run(cfg, base / f"seed{seed}", progress=False, figures=False)
    from empirical.experiments.sweep.param_sweep import run_sweep
    from empirical.experiments.sweep.spec import SweepSpec

    spec = SweepSpec(param="train.lr", values=[0.001], seeds=[0])
    cfg = load_run_config(SMOKE, TINY)
    run_sweep(cfg, spec, base / "sw", progress=False, log=None, stop_at=20)
    return base


def _read_only(path: Path) -> bool:
    """Make `path` (a directory, possibly with files) read-only for this process: chmod for
    a normal user; as root (whom permissions do not stop), a read-only tmpfs mounted over it
    with the same content. False: not possible here."""
    if os.geteuid() != 0:
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                p.chmod(0o555)
        return True
    keep = path.parent / f".{path.name}.content"
    shutil.copytree(path, keep)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)],
                        capture_output=True).returncode == 0  # fmt: skip
    if not ok:
        shutil.rmtree(keep)
        return False
    shutil.copytree(keep, path, dirs_exist_ok=True, copy_function=shutil.copy2)
    shutil.rmtree(keep)
    remount = ["mount", "-o", "remount,ro", str(path)]
    if subprocess.run(remount, capture_output=True).returncode != 0:
        subprocess.run(["umount", str(path)], capture_output=True)
        return False
    return True


def _undo_read_only(path: Path) -> None:
    if os.geteuid() != 0:
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
    else:
        subprocess.run(["umount", str(path)], capture_output=True)


@dataclass
class Ctx:
    tmp: Path
    run: Path
    other: Path
    file: Path
    ro: Path

    def fill(self, text: str) -> str:
        return text.format(
            run=self.run, other=self.other, tmp=self.tmp, file=self.file, ro=self.ro, smoke=SMOKE,
            configs=ROOT / "configs",
        )


@contextlib.contextmanager
def context(tmp_path: Path, trained: Path, readonly: bool, setup=None, held=None):
    ctx = Ctx(
        tmp=tmp_path,
        run=tmp_path / "run",
        other=tmp_path / "other",
        file=tmp_path / "afile.txt",
        ro=tmp_path / "ro",
    )
    shutil.copytree(trained / "seed0", ctx.run, copy_function=shutil.copy2)
    shutil.copytree(trained / "seed1", ctx.other, copy_function=shutil.copy2)
    ctx.file.write_text("a regular file\n")
    shutil.copytree(trained / "sw", ctx.tmp / "sw", copy_function=shutil.copy2)
    ctx.ro.mkdir()
    shutil.copytree(trained / "seed0", ctx.ro / "run", copy_function=shutil.copy2)
    if setup is not None:
        setup(ctx)
    made = False
    try:
        if readonly:
            made = _read_only(ctx.ro)
            if not made:
                pytest.skip("no way to make a read-only directory here")
        with contextlib.ExitStack() as holders:
            if held is not None:  # another process writes that directory
                holders.enter_context(held_elsewhere(ctx.fill(held)))
            yield ctx
    finally:
        if made:
            _undo_read_only(ctx.ro)


def files_of(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(),
                                             p.stat().st_mtime_ns)  # fmt: skip
    return out


# -- setups: what to break before the command ---------------------------------------------


def garbage(rel: str, data: bytes = b"\x00garbage\xff not what it should be\n"):
    def setup(ctx: Ctx) -> None:
        path = ctx.run / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return setup


def truncated(rel: str, keep: int = 200):
    def setup(ctx: Ctx) -> None:
        path = ctx.run / rel
        path.write_bytes(path.read_bytes()[:keep])

    return setup


def from_other(rel: str):
    def setup(ctx: Ctx) -> None:
        shutil.copy2(ctx.other / rel, ctx.run / rel)

    return setup


def removed(rel: str):
    def setup(ctx: Ctx) -> None:
        p = ctx.run / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()

    return setup


def metrics_line(n: int, text: str):
    def setup(ctx: Ctx) -> None:
        path = ctx.run / "metrics.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        lines[n - 1] = text
        path.write_text("".join(lines))

    return setup


def config_file(name: str, data: bytes):
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / name).write_bytes(data)

    return setup


def both(*setups):
    def setup(ctx: Ctx) -> None:
        for s in setups:
            s(ctx)

    return setup


MEMBER = "sw/members/lr=0.001_seed0"  # the one member of SWEEP, trained to step 20


def other_member(ctx: Ctx) -> None:
    """A sweep directory whose member holds a run of another config."""
    config = ctx.tmp / MEMBER / "config.toml"
    config.write_text(config.read_text().replace("p = 11", "p = 13"))


def member_with(rel: str, data: bytes):
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / MEMBER / rel).write_bytes(data)

    return setup


GRID = SMOKE.read_bytes() + b"\n[grid]\nseeds = [0]\n[grid.variants]\na = []\n"


def population_member(remove: str | None = None):
    """A population directory {tmp}/gp whose one member (a_seed0) is the trained smoke run,
    with `remove` taken out of it, and its grid config {tmp}/g.toml."""

    def setup(ctx: Ctx) -> None:
        (ctx.tmp / "g.toml").write_bytes(GRID)
        member = ctx.tmp / "gp" / "members" / "a_seed0"
        shutil.copytree(ctx.run, member, copy_function=shutil.copy2)
        if remove is not None:
            (member / remove).unlink()

    return setup


def garbage_source(ctx: Ctx) -> None:
    (ctx.tmp / "src").mkdir()
    (ctx.tmp / "src" / "checkpoint_step_1.pth").write_bytes(b"not a torch file")


# -- the table -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    command: str  # python -m COMMAND
    argv: tuple[str, ...]
    needle: str  # a piece of the one error line (the path or the value it names)
    what: str  # the input, in words (docs/robustness.md)
    setup: Callable[[Ctx], None] | None = None
    readonly: bool = False
    subprocess: bool = False
    held: str | None = None  # a directory whose writer lock another process holds


def C(id, command, argv, needle, what, setup=None, readonly=False, subprocess=False,  # noqa: N802
      held=None):  # fmt: skip
    return Case(id, command, tuple(argv.split()), needle, what, setup, readonly, subprocess, held)


E = "empirical"
TR = "train --no-progress --config {smoke} task.eval_size=200 train.steps=40"
RESUME = "train --no-progress --resume {run}"
SWEEP = "sweep --no-progress --config {smoke} --param train.lr=0.001 --out {tmp}/sw " + " ".join(
    TINY
)
NONUTF8 = b'name = "smoke"\n# \xff\xfe not UTF-8\n'
BUSY = "is being written by PID"  # the refusal of a second writer (empirical.runs.lock)

CASES = [
    # -- python -m empirical: the entry point
    C("cmd-unknown", E, "nope", "unknown command 'nope'", "an unknown command"),
    # -- train: config files and values
    C("train-no-figures-format", E, "train --no-figures --format pdf", "--no-figures with --format",
      "--no-figures with a figure format"),
    C("train-config-missing", E, "train --config {tmp}/missing.toml", "missing.toml",
      "--config that does not exist"),
    C("train-config-nonutf8", E, "train --config {tmp}/bad.toml", "not UTF-8",
      "--config not UTF-8", config_file("bad.toml", NONUTF8), subprocess=True),
    C("train-config-badtoml", E, "train --config {tmp}/bad.toml", "not valid TOML",
      "--config not valid TOML", config_file("bad.toml", b"[train\nsteps = = 3\n")),
    C("train-config-badjson", E, "train --config {tmp}/bad.json", "not valid JSON",
      "--config not valid JSON", config_file("bad.json", b"{\"seed\": ")),
    C("train-config-dir", E, "train --config {tmp}", "does not exist",
      "--config a directory"),
    C("train-device-cuda-abc", E, TR + " train.device=cuda:abc", "cuda:abc",
      "train.device=cuda:abc"),
    C("train-device-tpu", E, TR + " train.device=tpu", "'tpu'", "train.device=tpu"),
    C("train-steps-0", E, TR + " train.steps=0", "train.steps", "train.steps=0"),
    C("train-lr-abc", E, TR + " train.lr=abc", "train.lr", "train.lr=abc"),
    C("train-lr-neg", E, TR + " train.lr=-1", "train.lr", "train.lr=-1"),
    C("train-lr-nan", E, TR + " train.lr=nan", "train.lr", "train.lr=nan"),
    C("train-wd-neg", E, TR + " train.weight_decay=-1", "train.weight_decay",
      "train.weight_decay=-1"),
    C("train-batch-0", E, TR + " train.batch_size=0", "train.batch_size", "train.batch_size=0"),
    C("train-eval-every-0", E, TR + " train.eval_every=0", "train.eval_every",
      "train.eval_every=0"),
    C("train-ckpt-every-0", E, TR + " train.checkpoint_every=0", "train.checkpoint_every",
      "train.checkpoint_every=0"),
    C("train-snapshot-neg", E, TR + " train.snapshot_every=-1", "train.snapshot_every",
      "train.snapshot_every=-1"),
    C("train-warmup-neg", E, TR + " train.warmup_steps=-1", "train.warmup_steps",
      "train.warmup_steps=-1"),
    C("train-clip-0", E, TR + " train.grad_clip=0", "train.grad_clip", "train.grad_clip=0"),
    C("train-divergence-half", E, TR + " train.divergence_factor=0.5", "divergence_factor",
      "train.divergence_factor=0.5"),
    C("train-betas-one", E, TR + " train.betas=[0.9]", "train.betas", "train.betas=[0.9]"),
    C("train-autocast", E, TR + " train.autocast=fp8", "train.autocast", "train.autocast=fp8"),
    C("train-compile", E, TR + " train.compile=fast", "train.compile", "train.compile=fast"),
    C("train-cuda-graph", E, TR + " train.cuda_graph=always", "train.cuda_graph",
      "train.cuda_graph=always"),
    C("train-schedule", E, TR + " train.lr_schedule=linear", "train.lr_schedule",
      "train.lr_schedule=linear"),
    C("train-chunk", E, TR + " train.sample_chunk=3", "sample_chunk",
      "train.sample_chunk=3 (steps not a multiple)"),
    C("train-threads-neg", E, TR + " train.threads=-1", "train.threads", "train.threads=-1"),
    C("train-eval-batch-0", E, TR + " train.eval_batch_size=0", "train.eval_batch_size",
      "train.eval_batch_size=0"),
    C("train-seed-neg", E, TR + " seed=-1", "seed", "seed=-1"),
    C("train-name-slash", E, TR + " name=a/b", "name", "name=a/b"),
    C("train-task-p", E, TR + " task.p=1", "task.p", "task.p=1"),
    C("train-n-layers", E, TR + " model.n_layers=5", "model.n_layers", "model.n_layers=5 (2..4)"),
    C("train-act-fn", E, TR + " model.act_fn=gelu", "model.act_fn", "model.act_fn=gelu"),
    C("train-positions", E, TR + " model.positions=rotary", "model.positions",
      "model.positions=rotary"),
    C("train-relative-window-0", E, TR + " model.positions=relative model.relative_window=0",
      "model.relative_window", "model.relative_window=0"),
    C("train-normalization", E, TR + " model.normalization=LN", "model.normalization",
      "model.normalization=LN"),
    C("train-relative-content-learned", E, TR + " model.relative_content=true",
      "model.relative_content", "model.relative_content=true with learned positions"),
    C("train-relative-gain-0", E, TR + " model.positions=relative model.relative_gain=0",
      "model.relative_gain", "model.relative_gain=0"),
    C("train-relative-gain-learned", E, TR + " model.relative_gain=4", "model.relative_gain",
      "model.relative_gain=4 with learned positions"),
    C("train-teacher-no-state", E, TR + " model.teacher_forcing=true", "model.teacher_forcing",
      "model.teacher_forcing=true without a discrete state"),
    C("train-chain-hops-L", E, TR + " task.family=chain task.K=12 task.chain_hops=1,5",
      "raise task.L to at least 24", "task.family=chain, a hop count that cannot fit L "
      "(chain_hops=1,5 at L = 16)"),
    C("train-chain-K", E, TR + " task.family=chain task.chain_hops=1 task.chain_distractors=2",
      "K = 3", "task.family=chain, K too small for the chains asked (K = 3, 2 distractor "
      "chains)"),
    C("train-chain-held-hops", E, TR + " task.family=chain task.K=5 task.chain_held_out_hops=1,2",
      "leaving nothing to train", "task.family=chain, held-out hop counts that leave nothing "
      "to train"),
    C("train-unknown-field", E, TR + " train.nope=1", "nope", "train.nope=1 (unknown field)"),
    C("train-field-typo", E, TR + " train.stepz=100", "did you mean train.steps?",
      "train.stepz=100 (a typo: the close field is suggested)"),
    C("train-section-typo", E, TR + " trian.steps=100", "did you mean train.steps?",
      "trian.steps=100 (a typo in the section)"),
    C("train-override-no-eq", E, TR + " train.steps", "key=value", "override without `=`"),
    C("train-override-empty-key", E, TR + " =3", "empty key", "override `=3`"),
    C("train-seeds-repeated", E, TR + " --seeds 0 0 --runs-root {tmp}/r", "repeated",
      "--seeds 0 0"),
    C("train-seeds-neg", E, TR + " --seeds -1 --runs-root {tmp}/r", "seed", "--seeds -1"),
    C("train-seeds-text", E, TR + " --seeds x", "--seeds x: must be an integer", "--seeds x"),
    C("train-run-dir-two-seeds", E, TR + " --seeds 0 1 --run-dir {tmp}/r", "single seed",
      "--run-dir with two seeds"),
    C("train-rebuild-without-resume", E, TR + " --rebuild-eval-sets --run-dir {tmp}/r",
      "--rebuild-eval-sets", "--rebuild-eval-sets without --resume"),
    C("train-bad-flag", E, TR + " --bogus", "unrecognized arguments", "an unknown flag"),
    C("train-flag-typo", E, TR + " --seedz 1", "did you mean --seeds?",
      "a mistyped flag (`--seedz`: the close flag is suggested)"),
    C("train-field-as-flag", E, TR + " --steps 100", "train.steps=100",
      "a config field given as a flag (`--steps 100`: the override form is suggested)"),
    # -- train: output locations
    C("train-run-dir-file", E, TR + " --run-dir {file}", "afile.txt", "--run-dir a file"),
    C("train-run-dir-under-file", E, TR + " --run-dir {file}/x", "afile.txt",
      "--run-dir under a file"),
    C("train-run-dir-readonly", E, TR + " --run-dir {ro}/new", "cannot write",
      "--run-dir in a read-only directory", readonly=True),
    C("train-runs-root-file", E, TR + " --runs-root {file}", "afile.txt", "--runs-root a file"),
    C("train-runs-root-readonly", E, TR + " --runs-root {ro}", "cannot write",
      "--runs-root read-only", readonly=True),
    C("train-other-config", E, TR + " train.lr=0.002 --run-dir {run}", "different config",
      "--run-dir holding a run of another config"),
    C("train-same-config", E, TR + " --run-dir {run}", "--resume",
      "--run-dir holding this run already (no --resume)"),
    C("train-run-dir-busy", E, TR + " --run-dir {tmp}/busy", BUSY,
      "--run-dir being written by another process", held="{tmp}/busy"),
    C("train-seeds-one-busy", E, TR + " --seeds 0 1 --runs-root {tmp}/r", BUSY,
      "--seeds 0 1, seed 1's directory being written by another process",
      held="{tmp}/r/smoke/seed1"),
    # -- train --resume: what the run directory holds
    C("resume-missing", E, "train --resume {tmp}/missing", "no config.toml",
      "--resume a missing directory"),
    C("resume-file", E, "train --resume {file}", "afile.txt", "--resume a file"),
    C("resume-readonly", E, "train --no-progress --resume {ro}/run train.steps=60",
      "cannot write", "--resume a read-only run directory", readonly=True),
    C("resume-task-change", E, RESUME + " task.p=13", "task.p", "--resume changing task.p"),
    C("resume-bad-value", E, RESUME + " train.lr=abc", "train.lr", "--resume train.lr=abc"),
    C("resume-fewer-steps", E, RESUME + " train.steps=20", "step 40 already",
      "--resume to fewer steps than done"),
    C("resume-with-seeds", E, RESUME + " --seeds 1", "--seeds", "--resume with --seeds"),
    C("resume-config-garbage", E, RESUME, "config.toml", "config.toml garbage",
      garbage("config.toml")),
    C("resume-config-nonutf8", E, RESUME, "not UTF-8", "config.toml not UTF-8",
      garbage("config.toml", NONUTF8)),
    C("resume-config-unknown-field", E, RESUME, "bogus", "config.toml with an unknown field",
      garbage("config.toml", b"bogus = 1\n")),
    C("resume-config-empty", E, RESUME, "is empty", "config.toml empty",
      garbage("config.toml", b"")),
    C("resume-eval-sets-garbage", E, RESUME + " train.steps=60", "--rebuild-eval-sets",
      "eval_sets.pt garbage", garbage("eval_sets.pt")),
    C("resume-eval-sets-truncated", E, RESUME + " train.steps=60", "--rebuild-eval-sets",
      "eval_sets.pt truncated", truncated("eval_sets.pt", 5000)),
    C("resume-eval-sets-other-seed", E, RESUME + " train.steps=60", "seed 1",
      "eval_sets.pt of another seed", from_other("eval_sets.pt")),
    C("resume-metrics-bad-line", E, RESUME + " train.steps=60", "line 2",
      "metrics.jsonl: a corrupt middle line", metrics_line(2, "{\"step\": 20, \"ac\n")),
    C("resume-metrics-not-record", E, RESUME + " train.steps=60", "line 1",
      "metrics.jsonl: a line that is not a record", metrics_line(1, "[1, 2, 3]\n")),
    C("resume-metrics-order", E, RESUME + " train.steps=60", "line 3",
      "metrics.jsonl: steps out of order", metrics_line(3, "{\"step\": 0, \"acc\": {}}\n")),
    C("resume-metrics-other-run", E, RESUME + " train.steps=60", "another run",
      "metrics.jsonl of another run", from_other("metrics.jsonl")),
    C("resume-metrics-missing", E, RESUME + " train.steps=60", "repair",
      "metrics.jsonl missing", removed("metrics.jsonl")),
    C("resume-ckpt-garbage", E, RESUME + " train.steps=60", "last.pt",
      "checkpoints/last.pt garbage", garbage("checkpoints/last.pt")),
    C("resume-ckpt-truncated", E, RESUME + " train.steps=60", "last.pt",
      "checkpoints/last.pt truncated", truncated("checkpoints/last.pt", 3000)),
    C("resume-ckpt-other-run", E, RESUME + " train.steps=60", "another run",
      "checkpoints/last.pt of another run", from_other("checkpoints/last.pt")),
    C("resume-ckpt-is-snapshot", E, RESUME + " train.steps=60", "not a training checkpoint",
      "checkpoints/last.pt a weights-only snapshot",
      lambda c: shutil.copy2(c.run / "snapshots/step_000020.pt", c.run / "checkpoints/last.pt")),
    C("resume-imported", E, RESUME + " train.steps=60", "imported",
      "--resume a run imported from checkpoints (no optimiser state)",
      lambda c: (c.run / "imported.json").write_text("{}")),
    C("resume-checkpoints-a-file", E, RESUME + " train.steps=60", "checkpoints",
      "checkpoints/ a file", both(removed("checkpoints"), garbage("checkpoints"))),
    C("resume-busy", E, RESUME + " train.steps=60", BUSY,
      "--resume a run being written by another process", held="{run}"),
    # -- evaluate
    C("curves-missing", E, "curves {tmp}/missing --out {tmp}/c.png", "no such directory",
      "a missing run directory"),
    C("curves-no-config", E, "curves {tmp} --out {tmp}/c.png", "no config.toml",
      "a directory with no run"),
    C("curves-out-under-file", E, "curves {run} --out {file}/c.png", "is a file",
      "--out under a file"),
    C("curves-out-dir", E, "curves {run} --out {tmp}", "is a directory", "--out a directory"),
    C("curves-unknown-set", E, "curves {run} --sets 9var/x --out {tmp}/c.png", "9var/x",
      "--sets naming no evaluation set"),
    C("curves-labels-count", E, "curves {run} {run} --labels one --out {tmp}/c.png",
      "--labels", "one label for two runs"),
    C("curves-no-out", E, "curves {run}", "--out", "no --out"),
    C("evaluate-missing", E, "evaluate {tmp}/missing", "no such directory",
      "a missing run directory"),
    C("evaluate-file", E, "evaluate {file}", "not a directory", "a file as run directory"),
    C("evaluate-no-config", E, "evaluate {tmp}", "no config.toml", "a directory with no run"),
    C("evaluate-step-missing", E, "evaluate {run} --step 7", "step 7", "--step 7 (no snapshot)"),
    C("evaluate-batch-0", E, "evaluate {run} --batch-size 0", "--batch-size", "--batch-size 0"),
    C("evaluate-threads-neg", E, "evaluate {run} --threads -1", "--threads", "--threads -1"),
    C("evaluate-device-abc", E, "evaluate {run} --device cuda:abc", "cuda:abc",
      "--device cuda:abc"),
    C("evaluate-step-and-all", E, "evaluate {run} --step 20 --all-steps", "--all-steps",
      "--step with --all-steps"),
    C("evaluate-all-steps-trained", E, "evaluate {run} --all-steps", "--force",
      "--all-steps on a trained run"),
    C("evaluate-all-steps-readonly", E, "evaluate {ro}/run --all-steps --force", "cannot write",
      "--all-steps in a read-only run directory", readonly=True),
    C("evaluate-all-steps-busy", E, "evaluate {run} --all-steps --force", BUSY,
      "--all-steps on a run being written by another process", held="{run}"),
    C("evaluate-eval-sets-garbage", E, "evaluate {run}", "eval_sets.pt",
      "eval_sets.pt garbage", garbage("eval_sets.pt")),
    C("evaluate-eval-sets-other-seed", E, "evaluate {run}", "seed 1",
      "eval_sets.pt of another seed", from_other("eval_sets.pt")),
    C("evaluate-ckpt-garbage", E, "evaluate {run}", "last.pt", "checkpoints/last.pt garbage",
      garbage("checkpoints/last.pt")),
    C("evaluate-snapshot-garbage", E, "evaluate {run} --step 20", "step_000020.pt",
      "a garbage snapshot", garbage("snapshots/step_000020.pt")),
    C("evaluate-snapshot-other-run", E, "evaluate {run} --step 20", "another run",
      "a snapshot of another run", from_other("snapshots/step_000020.pt")),
    C("evaluate-config-garbage", E, "evaluate {run}", "config.toml", "config.toml garbage",
      garbage("config.toml")),
    # -- analyze
    C("analyze-every-0", E, "analyze {run} --every 0", "--every", "--every 0"),
    C("analyze-probe-size", E, "analyze {run} --probe-size 8", "--probe-size", "--probe-size 8"),
    C("analyze-threads-neg", E, "analyze {run} --threads -1", "--threads", "--threads -1"),
    C("analyze-seed-neg", E, "analyze {run} --seed -1", "--seed", "--seed -1"),
    C("analyze-step-missing", E, "analyze {run} --step 7", "step 7", "--step 7 (no snapshot)"),
    C("analyze-out-file", E, "analyze {run} --out {file}", "afile.txt", "--out a file"),
    C("analyze-out-under-file", E, "analyze {run} --out {file}/x", "afile.txt",
      "--out under a file"),
    C("analyze-out-readonly", E, "analyze {run} --out {ro}/x", "cannot", "--out read-only",
      readonly=True),
    C("analyze-no-run", E, "analyze {tmp}", "no config.toml", "a directory with no run"),
    C("analyze-eval-sets-other-seed", E, "analyze {run} --no-figures --quiet --out {tmp}/a",
      "seed 1", "eval_sets.pt of another seed", from_other("eval_sets.pt")),
    C("analyze-metrics-bad-line", E, "analyze {run} --no-figures --quiet --out {tmp}/a",
      "line 2", "metrics.jsonl: a corrupt line", metrics_line(2, "not json\n")),
    C("analyze-ckpt-garbage", E, "analyze {run} --out {tmp}/a", "last.pt",
      "checkpoints/last.pt garbage", garbage("checkpoints/last.pt")),
    # -- codes (issue #47)
    C("codes-no-run", E, "codes {tmp}", "not a run directory", "a directory with no run"),
    C("codes-train-size", E, "codes {run} --train-size 8", "--train-size", "--train-size 8"),
    C("codes-several-no-out", E, "codes {run} {run}", "--out DIR", "several runs, no --out"),
    C("codes-step-missing", E, "codes {run} --step 7 --quiet", "step 7", "--step 7 (no snapshot)"),
    # -- graph-ladder, graph-mechanism (issue #46)
    C("graph-ladder-seeds-neg", E, "graph-ladder --seeds -1", "--seeds -1", "--seeds -1"),
    C("graph-ladder-variant", E, "graph-ladder --variants nope", "--variants nope",
      "--variants nope"),
    C("graph-ladder-family", E, "graph-ladder --config {smoke}", "task.family",
      "a config of another family"),
    C("graph-ladder-no-runs", E, "graph-ladder --config {configs}/graph_ladder.toml --no-train "
      "--variants ff2 --seeds 0 --out {tmp}/gl", "no finished run",
      "--no-train where no run is finished"),
    C("graph-mechanism-no-run", E, "graph-mechanism {tmp}/nope", "no such directory",
      "a missing run directory"),
    C("graph-mechanism-n-0", E, "graph-mechanism {run} --n 0", "--n 0", "--n 0"),
    C("graph-leading-leaves", E, "sample --config {configs}/graph_ladder_ln.toml "
      "task.graph_leading_leaves=2", "task.graph_leading_leaves",
      "task.graph_leading_leaves=2 with graphs of 2 nodes"),
    # -- pool-interventions, recount (issue #45)
    C("pool-interventions-empty", E, "pool-interventions {tmp} --out {tmp}/pooled",
      "no interventions.json", "a DIR with no interventions.json"),
    C("recount-empty", E, "recount {tmp}", "no claims.json", "a directory with no claims.json"),
    C("at-step-no-run", E, "at-step {tmp}/nope --step 10 --out {tmp}/cut", "no such directory",
      "a missing run directory"),
    C("trivial-rules-bad-set", E, "trivial-rules --config {smoke} --sets 9var/x", "9var/x",
      "a set the task does not have"),
    # -- attribute, intervene (issue #36)
    C("attribute-window-backwards", E, "attribute {run} --window 9:3", "9:3", "--window 9:3"),
    C("attribute-null-draws-0", E, "attribute {run} --window 3:9 --null-draws 0", "--null-draws",
      "--null-draws 0"),
    C("intervene-steps-0", E, "intervene {run} --checkpoint x --steps 0", "--steps",
      "--steps 0"),
    # -- compare-qk
    C("compare-batch-0", E, "compare-qk {run} --batch-size 0", "--batch-size", "--batch-size 0"),
    C("compare-every-0", E, "compare-qk {run} --every 0", "--every", "--every 0"),
    C("compare-one-step-steps-0", E, "compare-qk {run} --one-step-steps 0", "--one-step-steps",
      "--one-step-steps 0"),
    C("compare-eval-size-neg", E, "compare-qk {run} --eval-size -5", "--eval-size",
      "--eval-size -5"),
    C("compare-threads-neg", E, "compare-qk {run} --threads -1", "--threads", "--threads -1"),
    C("compare-steps-text", E, "compare-qk {run} --steps 1,x", "1,x", "--steps 1,x"),
    C("compare-steps-missing", E, "compare-qk {run} --steps 7 --out {tmp}/c", "[7]",
      "--steps 7 (no snapshot)"),
    C("compare-one-step-at", E, "compare-qk {run} --one-step-at 7 --out {tmp}/c",
      "--one-step-at 7", "--one-step-at 7 (no snapshot)"),
    C("compare-lrs-zero", E, "compare-qk {run} --one-step-lrs 0", "positive",
      "--one-step-lrs 0"),
    C("compare-score-neg", E, "compare-qk {run} --score-steps -1", "positive",
      "--score-steps -1"),
    C("compare-out-file", E, "compare-qk {run} --out {file}", "afile.txt", "--out a file"),
    C("compare-out-readonly", E, "compare-qk {run} --out {ro}/x", "cannot", "--out read-only",
      readonly=True),
    C("compare-no-snapshots", E, "compare-qk {run} --out {tmp}/c", "no snapshots",
      "a run without snapshots", removed("snapshots")),
    C("compare-eval-sets-garbage", E, "compare-qk {run} --out {tmp}/c --one-step-at 20",
      "eval_sets.pt", "eval_sets.pt garbage", garbage("eval_sets.pt")),
    # -- chain-attention
    C("chain-attention-family", E, "chain-attention {run}", "reads chain runs",
      "a run of the assign_add family"),
    C("chain-attention-n-zero", E, "chain-attention {run} --n 0", "--n 0", "--n 0"),
    C("chain-attention-no-run", E, "chain-attention {tmp}", "no config.toml",
      "a directory with no run"),
    # -- chain-patching
    C("chain-patching-family", E, "chain-patching {run}", "reads chain runs",
      "a run of the assign_add family"),
    C("chain-patching-n-zero", E, "chain-patching {run} --n 0", "--n 0", "--n 0"),
    # -- chain-compare-qk
    C("chain-compare-qk-family", E, "chain-compare-qk {run}", "reads chain runs",
      "a run of the assign_add family"),
    C("chain-compare-qk-n-zero", E, "chain-compare-qk {run} --n 0", "--n 0", "--n 0"),
    C("chain-compare-qk-no-run", E, "chain-compare-qk {tmp}", "no config.toml",
      "a directory with no run"),
    # -- ladder
    C("ladder-step-missing", E, "ladder {run} --step 7 --out {tmp}/l", "--step 7",
      "--step 7 (no snapshot)"),
    C("ladder-no-snapshots", E, "ladder {run} --step 20 --out {tmp}/l", "no snapshots",
      "a run without snapshots", removed("snapshots")),
    C("ladder-batch-0", E, "ladder {run} --batch-size 0", "--batch-size", "--batch-size 0"),
    C("ladder-eval-size-neg", E, "ladder {run} --eval-size -5", "--eval-size",
      "--eval-size -5"),
    C("ladder-grid-zero", E, "ladder {run} --grid 0", "positive", "--grid 0"),
    C("ladder-out-file", E, "ladder {run} --step 20 --out {file}", "afile.txt", "--out a file"),
    C("ladder-no-run", E, "ladder {tmp}", "no config.toml", "a directory with no run"),
    # -- ladder-dynamics
    C("ladder-dynamics-steps-0", E, "ladder-dynamics steps=0 --out {tmp}/ld",
      "steps: must be an integer >= 1", "steps=0"),
    C("ladder-dynamics-release", E, 'ladder-dynamics releases=["wings"] --out {tmp}/ld',
      "'wings' is not one of", "an unknown release"),
    C("ladder-dynamics-out-file", E, "ladder-dynamics --out {file}", "afile.txt",
      "--out a file"),
    # -- race
    C("race-only-unknown", E, "race --only nope --out {tmp}/race", "is not a race configuration",
      "--only nope"),
    C("race-steps-0", E, "race --only baseline steps=0 --out {tmp}/race",
      "steps: must be an integer >= 1", "steps=0"),
    C("race-seeds-bad", E, "race --seeds x --out {tmp}/race", "--seeds x", "--seeds x"),
    C("race-out-file", E, "race --only baseline --out {file}", "afile.txt", "--out a file"),
    # -- sweep and grid
    C("sweep-out-file", E, "sweep --config {smoke} --param train.lr=0.001 --out {file}",
      "afile.txt", "--out a file"),
    C("sweep-out-under-file", E, "sweep --config {smoke} --param train.lr=0.001 --out {file}/x",
      "afile.txt", "--out under a file"),
    C("sweep-out-readonly", E, "sweep --config {smoke} --param train.lr=0.001 --out {ro}/x",
      "cannot write", "--out read-only", readonly=True),
    C("sweep-max-batch-neg", E, "sweep --config {smoke} --param train.lr=0.001 --max-batch -1",
      "--max-batch -1", "--max-batch -1"),
    C("sweep-target", E, "sweep --config {smoke} --param train.lr=0.001 --target 2", "target",
      "--target 2"),
    C("sweep-metric", E, "sweep --config {smoke} --param train.lr=0.001 --metric nope",
      "nope", "--metric nope"),
    C("sweep-no-param", E, "sweep --config {smoke} --out {tmp}/sw", "param",
      "no swept parameter"),
    C("sweep-at-step-training", E, SWEEP + " --at-step 20", "use it with --summarize",
      "--at-step without --summarize"),
    C("sweep-at-step-beyond", E, SWEEP + " --summarize --at-step 999", "allowed 0..train.steps",
      "--at-step beyond train.steps"),
    C("sweep-config-missing", E, "sweep --config {tmp}/missing.toml", "missing.toml",
      "--config that does not exist"),
    C("sweep-member-other-config", E,
      SWEEP, "different config",
      "a member directory holding another config", other_member),
    C("sweep-member-ckpt-garbage", E,
      SWEEP, "last.pt", "a member's checkpoints/last.pt garbage",
      member_with("checkpoints/last.pt", b"garbage")),
    C("sweep-busy", E, SWEEP, BUSY, "--out being written by another process", held="{tmp}/sw"),
    C("sweep-summarize-busy", E, SWEEP + " --summarize", BUSY,
      "--summarize while another process writes --out", held="{tmp}/sw"),
    C("grid-no-table", E, "grid --config {smoke}", "no [grid] table", "a config without [grid]"),
    C("grid-out-file", E, "grid --config {tmp}/g.toml --out {file}", "afile.txt",
      "--out a file", config_file("g.toml", SMOKE.read_bytes() + b"\n[grid.variants]\na = []\n")),
    C("grid-only-unknown", E, "grid --config {tmp}/g.toml --only nope --out {tmp}/g", "nope",
      "--only nope", config_file("g.toml", SMOKE.read_bytes() + b"\n[grid.variants]\na = []\n")),
    C("grid-max-batch-neg", E, "grid --config {tmp}/g.toml --max-batch -1 --out {tmp}/g",
      "--max-batch -1", "--max-batch -1",
      config_file("g.toml", SMOKE.read_bytes() + b"\n[grid.variants]\na = []\n")),
    C("grid-busy", E, "grid --config {tmp}/g.toml --out {tmp}/g", BUSY,
      "--out being written by another process",
      config_file("g.toml", SMOKE.read_bytes() + b"\n[grid.variants]\na = []\n"), held="{tmp}/g"),
    # -- claims (a population: tests/test_population_claims.py has the rest)
    C("claims-no-table", E, "claims --config {smoke}", "no [grid] table",
      "a config without [grid]"),
    C("claims-jobs-zero", E, "claims --config {tmp}/g.toml --jobs 0 --out {tmp}/g", "--jobs 0",
      "--jobs 0", config_file("g.toml", GRID)),
    C("claims-empty", E, "claims --config {tmp}/g.toml --summarize --out {tmp}/g",
      "empty population", "--summarize of a population never trained", config_file("g.toml", GRID)),
    C("claims-member-other-config", E, "claims --config {tmp}/g.toml --summarize --out {tmp}/gp",
      "another config", "a member of another config (mixed populations)", population_member()),
    C("claims-member-no-metrics", E, "claims --config {tmp}/g.toml --summarize --out {tmp}/gp "
      + " ".join(TINY), "without metrics", "a finished member without metrics.jsonl",
      population_member("metrics.jsonl")),
    C("claims-busy", E, "claims --config {tmp}/g.toml --summarize --out {tmp}/gp " + " ".join(TINY),
      BUSY, "--summarize while another process writes --out", population_member(),
      held="{tmp}/gp"),
    # -- import-checkpoints
    C("import-src-missing", E, "import-checkpoints {tmp}/src --out {tmp}/imp", "no such folder",
      "SRC missing"),
    C("import-src-garbage", E, "import-checkpoints {tmp}/src --out {tmp}/imp --quiet",
      "checkpoint_step_1.pth", "a garbage checkpoint in SRC", garbage_source),
    C("import-out-file", E, "import-checkpoints {tmp} --out {file}", "afile.txt",
      "--out a file"),
    C("import-out-under-file", E, "import-checkpoints {tmp} --out {file}/x", "afile.txt",
      "--out under a file"),
    C("import-out-readonly", E, "import-checkpoints {tmp} --out {ro}/x", "cannot write",
      "--out read-only", readonly=True),
    C("import-out-run", E, "import-checkpoints {tmp} --out {run}", "already holds",
      "--out an existing run"),
    C("import-final-step", E, "import-checkpoints {tmp} --out {tmp}/imp --final-step -1",
      "--final-step", "--final-step -1"),
    C("import-out-busy", E, "import-checkpoints {tmp}/src --out {tmp}/imp --quiet", BUSY,
      "--out being written by another process", garbage_source, held="{tmp}/imp"),
    # -- reproduce
    C("reproduce-runs-root-file", E, "reproduce --config {smoke} --runs-root {file}",
      "afile.txt", "--runs-root a file"),
    C("reproduce-runs-root-readonly", E, "reproduce --config {smoke} --runs-root {ro}",
      "{ro}", "--runs-root read-only", readonly=True),
    C("reproduce-bad-override", E, "reproduce --config {smoke} train.steps=0", "train.steps",
      "train.steps=0"),
    # -- repair
    C("repair-missing", E, "repair {tmp}/missing", "no such directory", "a missing directory"),
    C("repair-no-run", E, "repair {tmp}", "no config.toml", "a directory with no run"),
    C("repair-readonly", E, "repair {ro}/run", "cannot write", "a read-only run with a bad line",
      readonly=True,
      setup=lambda c: (c.ro / "run" / "metrics.jsonl").write_text("{bad\n{\"step\": 9}\n")),
    C("repair-config-garbage", E, "repair {run}", "config.toml", "config.toml garbage",
      garbage("config.toml")),
    C("repair-busy", E, "repair {run}", BUSY, "a run being written by another process",
      held="{run}"),
    # -- unlock
    C("unlock-missing", E, "unlock {tmp}/missing", "no such directory", "a missing directory"),
    C("unlock-busy", E, "unlock {run}", BUSY,
      "a run whose writer is alive (nothing stale to remove)", held="{run}"),
    C("unlock-file", E, "unlock {file}", "afile.txt", "a file, not a directory"),
    # -- sample
    C("sample-config-nonutf8", E, "sample --config {tmp}/bad.toml", "not UTF-8",
      "--config not UTF-8", config_file("bad.toml", NONUTF8)),
    C("sample-device", E, "sample --device cuda:abc", "cuda:abc", "--device cuda:abc"),
    C("sample-chain-hops-L", E, "sample task.family=chain task.K=12 task.chain_hops=1,5",
      "raise task.L to at least 24", "task.family=chain, a hop count that cannot fit L "
      "(chain_hops=1,5 at L = 16)"),
    C("sample-chain-K", E, "sample task.family=chain task.L=40 task.chain_distractors=3",
      "K = 5", "task.family=chain, K too small for the chains asked (K = 5, 3 distractor "
      "chains)"),
    C("sample-chain-held-hops", E, "sample task.family=chain task.chain_held_out_hops=1,2",
      "leaving nothing to train", "task.family=chain, held-out hop counts that leave nothing "
      "to train"),
    C("sample-chain-split", E, "sample task.family=chain --split 1var/ind", "chain/0var",
      "task.family=chain with an assign_add set name (`--split 1var/ind`)"),
    C("sample-chain-pointer", E, "sample task.family=chain task.chain_held_out_pointers=a-b",
      "'u->w'", "task.family=chain, a held-out pointer pair not written `u->w`"),
    # -- python -m disentangled
    C("dis-step-out-file", "disentangled", "step --out {file}", "afile.txt", "step --out a file",
      subprocess=True),
    C("dis-step-out-under-file", "disentangled", "step --out {file}/x", "afile.txt",
      "step --out under a file"),
    C("dis-step-out-readonly", "disentangled", "step --out {ro}/x", "cannot write",
      "step --out read-only", readonly=True),
    C("dis-dynamics-out-file", "disentangled", "dynamics --out {file}", "afile.txt",
      "dynamics --out a file"),
    C("dis-dynamics-out-readonly", "disentangled", "dynamics --out {ro}", "cannot write",
      "dynamics --out a read-only directory", readonly=True),
    C("dis-random-out-file", "disentangled", "random-embedding --out {file}", "afile.txt",
      "random-embedding --out a file"),
    C("dis-threads-0", "disentangled", "g1 --threads 0", "--threads", "--threads 0"),
    C("dis-p-2", "disentangled", "g1 --p 2", "--p", "g1 --p 2"),
    C("dis-top-0", "disentangled", "g1 --top 0", "--top", "g1 --top 0"),
    C("dis-lr-neg", "disentangled", "dynamics --lr -1 --out {tmp}/d", "--lr", "dynamics --lr -1"),
    C("dis-mix", "disentangled", "dynamics --mix 3var=1 --out {tmp}/d", "--mix",
      "dynamics --mix 3var=1"),
    C("dis-etas-neg", "disentangled", "step --etas -1", "--etas", "step --etas -1"),
    C("dis-dims-0", "disentangled", "random-embedding --dims 0", "--dims",
      "random-embedding --dims 0"),
    # -- python -m theory
    C("theory-report-out-dir", "theory", "report --quick --out {tmp}", "is a directory",
      "report --out a directory", subprocess=True),
    C("theory-report-out-under-file", "theory", "report --quick --out {file}/r.md", "afile.txt",
      "report --out under a file"),
    C("theory-report-out-readonly", "theory", "report --quick --out {ro}/r.md", "cannot write",
      "report --out in a read-only directory", readonly=True),
    C("theory-g1-p", "theory", "g1 --p 1", "--p", "g1 --p 1"),
    C("theory-g1-K", "theory", "g1 --K 0", "--K", "g1 --K 0"),
    C("theory-g1-L", "theory", "g1 --L 5", "--L", "g1 --L 5"),
    C("theory-g1-beta", "theory", "g1 --beta nan", "--beta", "g1 --beta nan"),
    C("theory-g1-top", "theory", "g1 --top 0", "--top", "g1 --top 0"),
    C("theory-unknown", "theory", "nope", "invalid choice", "an unknown command"),
]  # fmt: skip

# the faults whose right outcome is a result, not an error (tested in test_robustness.py,
# test_kill.py and, for concurrent writers and readers, test_run_lock.py)
CORRECT_RESULTS = [
    ("train --resume", "metrics.jsonl with an incomplete last line (a crash mid-append)",
     "the line is dropped with a note; metrics equal an uninterrupted run's"),
    ("train --resume", "stale .tmp files from a kill during an atomic write",
     "removed at the next start; metrics equal an uninterrupted run's"),
    ("train (kill -9)", "SIGKILL during training, at several moments, and during a checkpoint "
     "write; then --resume", "metrics.jsonl (but elapsed_s) and final weights equal an "
     "uninterrupted run's"),
    ("sweep (kill -9)", "SIGKILL during a sweep; the same command again",
     "members resume; metrics and weights equal an uninterrupted sweep's"),
    ("train", "a full disk (ENOSPC) during a checkpoint, a snapshot or a metrics append",
     "one error line naming the file; the last checkpoint and the log intact; a resume "
     "after freeing space gives an uninterrupted run's metrics"),
    ("train --resume", "train.lr / grad_clip / warmup_steps / divergence_factor changed",
     "accepted and recorded in config_history.jsonl"),
    ("train --resume", "summary.json garbage", "rewritten at the end"),
    ("train --resume", "stopped.json garbage", "removed (the run trains again from last.pt)"),
    ("train --resume --rebuild-eval-sets", "eval_sets.pt garbage or another seed's",
     "rebuilt from the config; the run goes on with the right sets"),
    ("repair", "metrics.jsonl with bad lines", "valid lines kept, the others dropped and "
     "counted, the original kept as metrics.jsonl.bak"),
    ("repair", "metrics.jsonl missing", "rebuilt from the snapshots and the checkpoint "
     "(training losses null, marked rebuilt); the resume then works"),
    ("evaluate, train --resume", "a run directory from before fingerprints (none in any file)",
     "accepted (only a different fingerprint is refused)"),
    ("evaluate", "a read-only run directory without eval_sets.pt",
     "evaluated; the sets are kept in memory, with a note"),
    ("sweep", "a finished member's summary.json garbage", "the member is resumed at its last "
     "step, which writes the summary again"),
    ("sweep", "a member's stopped.json garbage", "the member is not trained again; the "
     "message says how to resume it"),
    ("train, train --resume (two at once)", "a second writer of a run directory while the "
     "first trains (real processes)", "the second: one error line naming the first's PID, "
     "host and command, nothing written; the first's metrics equal an undisturbed run's"),
    ("evaluate, load_run", "a run being trained by another process", "read without the lock: "
     "the last checkpoint, every complete metrics record; nothing written"),
    ("train (kill -9)", "SIGKILL of a run's writer, then --resume at once", "no stale lock "
     "(the OS released it): the resume starts at once; nothing for repair to do"),
    ("sweep, sweep --executor local", "a member another process writes (another job given "
     "it, a resume of it)", "left to that process with a line naming it; the others trained; "
     "never trained twice"),
    ("unlock", "the lock file of a writer killed with kill -9", "removed (refused while its "
     "writer runs); a file naming a process gone from this host is never named as the holder"),
    ("train", "a file system without working flock", "written without the lock, with one "
     "warning on stderr"),
    ("theory report", "--out into a missing directory", "the directory is created"),
    ("disentangled dynamics", "--out a missing directory", "created, files written"),
]  # fmt: skip


# -- running a case ------------------------------------------------------------------------


def _main_of(command: str):
    if command == "empirical":
        from empirical.__main__ import main
    elif command == "disentangled":
        from disentangled.__main__ import main
    else:
        from theory.__main__ import main
    return main


def run_case(case: Case, ctx: Ctx, capsys) -> tuple[int, str]:
    argv = [ctx.fill(a) for a in case.argv]
    if case.subprocess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [sys.executable, "-m", case.command, *argv],
            cwd=ctx.tmp,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        return proc.returncode, proc.stderr
    cwd = os.getcwd()
    os.chdir(ctx.tmp)  # default output locations (runs/...) land in the test's directory
    try:
        code = _main_of(case.command)(argv)
    finally:
        os.chdir(cwd)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_error_line_and_changes_nothing(case, tmp_path, trained, capsys):
    with context(tmp_path, trained, case.readonly, case.setup, case.held) as ctx:
        before = files_of(tmp_path)
        code, err = run_case(case, ctx, capsys)
        after = files_of(tmp_path)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert ctx.fill(case.needle) in lines[0], lines[0]
    print(lines[0].replace(str(tmp_path), "TMP"))  # shown by `pytest -rP`
    changed = sorted(k for k in before if after.get(k) != before[k])
    added = sorted(set(after) - set(before))
    assert not changed and not added, (changed, added)


def test_every_command_has_cases():
    from empirical.__main__ import COMMANDS

    covered = {c.argv[0] for c in CASES if c.command == "empirical"}
    assert set(COMMANDS) <= covered, set(COMMANDS) - covered


def test_docs_list_every_case():
    text = (ROOT / "docs" / "robustness.md").read_text()
    assert markdown_table() in text, "regenerate the table: python tests/test_bad_inputs.py"


def markdown_table() -> str:
    """The table of docs/robustness.md."""
    rows = ["| # | command | input | outcome |", "|---|---|---|---|"]
    n = 0
    for c in CASES:
        n += 1
        cmd = f"`{c.command} {c.argv[0]}`"
        rows.append(f"| {n} | {cmd} | {c.what} | clear error |")
    for cmd, what, outcome in CORRECT_RESULTS:
        n += 1
        rows.append(f"| {n} | `{cmd}` | {what} | correct result: {outcome} |")
    counts = (
        f"\n{len(CASES)} clear errors, {len(CORRECT_RESULTS)} correct results, "
        f"0 tracebacks, 0 silently wrong ({n} cases).\n"
    )
    return "\n".join(rows) + "\n" + counts


if __name__ == "__main__":
    print(markdown_table())
