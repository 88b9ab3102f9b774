"""`RunDir`: the one place that names the files of a run directory and reads them.

    run = RunDir("runs/paper/seed0")
    cfg = run.read_config()              # the resolved RunConfig (config.toml)
    records = run.read_metrics()         # metrics.jsonl, one record per evaluation
    step, path = run.snapshots()[-1]     # snapshots/step_XXXXXX.pt
    model_path = run.final_model()       # checkpoints/last.pt, else the last snapshot

    config.toml            the resolved RunConfig
    config_history.jsonl   every start and resume, with what a resume changed
    eval_sets.pt           the seed's evaluation sets and held-out pairs
    metrics.jsonl(.bak)    one line per evaluation (.bak: before `repair` rewrote it)
    checkpoints/last.pt    resumable state (model, optimiser, RNG, step), replaced atomically
    snapshots/step_XXXXXX.pt   weights-only snapshots for analysis over training
    summary.json, training_curves.png   final accuracies, phases, timing; Figure 2
    stopped.json           why and when a run stopped on a diverged loss
    running.json           a sweep member's claim by a cluster job (removed when it ends)
    imported.json          provenance of a run imported from another codebase's checkpoints
    writer.lock            the writer's lock (empirical.runs.lock): PID, host, command, start
    analysis/, compare_qk/, compare_qk_spike1/   `analyze`, `compare-qk` (and the claims')

Checkpoints, snapshots and metrics records carry the run's config fingerprint, eval_sets.pt
that of its task and seed (empirical.runs.config); `read_metrics`, `read_eval_sets` and
`check_model_file` refuse what carries another (files without one are accepted).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from disentangled.errors import UsageError, UserError
from empirical.config.io import ConfigError
from empirical.runs.config import config_fingerprint, load_run_config
from empirical.runs.metrics_log import read_metrics

SNAPSHOT_RE = re.compile(r"step_(\d+)\.pt")


def _file(*parts: str) -> property:
    """A read-only property: the path `parts` under the directory (`self.path`)."""
    return property(lambda self: self.path.joinpath(*parts))


class _Directory:
    """A directory whose files the subclass names (`path`; shown as `Class('path')`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)


class RunDir(_Directory):
    """The files of one run directory (nothing is created or read on construction)."""

    CONFIG = "config.toml"
    CONFIG_HISTORY = "config_history.jsonl"
    EVAL_SETS = "eval_sets.pt"
    METRICS = "metrics.jsonl"
    METRICS_BACKUP = "metrics.jsonl.bak"
    CHECKPOINTS = "checkpoints"
    LAST = "last.pt"
    SNAPSHOTS = "snapshots"
    SUMMARY = "summary.json"
    TRAINING_CURVES = "training_curves.png"
    STOPPED = "stopped.json"
    RUNNING = "running.json"
    IMPORTED = "imported.json"
    WRITER_LOCK = "writer.lock"
    ANALYSIS = "analysis"
    COMPARE_QK = "compare_qk"
    COMPARE_QK_SPIKE1 = "compare_qk_spike1"  # compare-qk across the first spike (claims)
    # inside an analysis or compare-qk output directory (which --out may put elsewhere)
    ANALYSIS_JSON = "analysis.json"
    COMPARE_QK_JSON = "compare_qk.json"
    BLOCKS_NPZ = "blocks.npz"
    SUMMARY_MD = "summary.md"

    def __init__(self, path: str | os.PathLike | RunDir):
        super().__init__(path.path if isinstance(path, RunDir) else path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunDir) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    # -- paths ------------------------------------------------------------------------------

    config = _file(CONFIG)
    config_history = _file(CONFIG_HISTORY)
    eval_sets = _file(EVAL_SETS)
    metrics = _file(METRICS)
    metrics_backup = _file(METRICS_BACKUP)
    checkpoints_dir = _file(CHECKPOINTS)
    last_checkpoint = _file(CHECKPOINTS, LAST)
    snapshots_dir = _file(SNAPSHOTS)
    summary = _file(SUMMARY)
    training_curves = _file(TRAINING_CURVES)
    stopped = _file(STOPPED)
    running = _file(RUNNING)
    imported = _file(IMPORTED)
    writer_lock = _file(WRITER_LOCK)
    compare_qk_dir = _file(COMPARE_QK)
    compare_qk_spike1_dir = _file(COMPARE_QK_SPIKE1)

    def snapshot(self, step: int) -> Path:
        return self.snapshots_dir / f"step_{int(step):06d}.pt"

    def analysis_dir(self, step: int | None = None) -> Path:
        base = self.path / self.ANALYSIS
        return base if step is None else base / f"step_{int(step):06d}"

    # -- what it holds ----------------------------------------------------------------------

    def is_run(self) -> bool:
        """Whether a run config is there (a run was started or imported here)."""
        return self.config.is_file()

    def require_run(self) -> RunDir:
        """Self, or a RunDirError naming the directory if it holds no run."""
        if not self.path.exists():
            raise RunDirError(f"{self.path}: no such directory (not a run directory)")
        if not self.path.is_dir():
            raise RunDirError(f"{self.path}: not a directory (expected a run directory)")
        if not self.is_run():
            raise RunDirError(
                f"{self.path}: holds no {self.CONFIG} (not a run directory written by "
                "`python -m empirical train` or `import-checkpoints`)"
            )
        return self

    def require_family(self, family: str, command: str) -> RunDir:
        """Self as `require_run` checks it, or a UsageError unless its task is of `family`
        (the commands of one family's study read only its runs)."""
        found = self.require_run().read_config().task.family
        if found != family:
            raise UsageError(f"{self}: task.family = {found!r}; {command} reads {family} runs")
        return self

    def snapshots(self) -> list[tuple[int, Path]]:
        """(step, path) of every snapshots/step_XXXXXX.pt, sorted by step."""
        found = []
        if self.snapshots_dir.is_dir():
            for path in self.snapshots_dir.iterdir():
                m = SNAPSHOT_RE.fullmatch(path.name)
                if m:
                    found.append((int(m.group(1)), path))
        return sorted(found)

    def snapshot_steps(self) -> list[int]:
        return [s for s, _ in self.snapshots()]

    def final_model(self) -> Path:
        """The run's latest weights: checkpoints/last.pt, else its last snapshot."""
        if self.last_checkpoint.is_file():
            return self.last_checkpoint
        snaps = self.snapshots()
        if not snaps:
            raise RunDirError(
                f"{self.path}: no {self.CHECKPOINTS}/{self.LAST} and no {self.SNAPSHOTS}/"
                "step_*.pt: nothing to load"
            )
        return snaps[-1][1]

    def model_path(self, step: int | None = None) -> Path:
        """The final model (step None) or the snapshot at `step`, with an error listing the
        available steps if there is none."""
        if step is None:
            return self.final_model()
        path = self.snapshot(step)
        if not path.is_file():
            avail = self.snapshot_steps()
            shown = ", ".join(map(str, avail[:8])) + (", ..." if len(avail) > 8 else "")
            raise RunDirError(
                f"{self.path}: no snapshot for step {step} (snapshots at: {shown or 'none'})"
            )
        return path

    # -- reading ----------------------------------------------------------------------------

    def read_config(self):
        """The run's RunConfig (config.toml)."""
        self.require_run()
        try:
            empty = not self.config.read_bytes().strip()
        except OSError as exc:
            raise RunDirError(f"{self.config}: unreadable ({exc.strerror or exc})") from None
        if empty:  # a run's saved config is never empty: defaults would pass for it
            raise RunDirError(
                f"{self.config} is empty (a run saves its whole config there); put the run's "
                "config back (every checkpoint holds a copy: `run_config`)"
            )
        return load_run_config(self.config)

    def read_two_layer_config(self, what: str):
        """The run's RunConfig, refusing a model of another depth than the paper's 2 layers
        (for `what`: an analysis written for the paper's model, whose measures name its
        layer 1 and layer 2)."""
        cfg = self.read_config()
        if cfg.model.n_layers != 2:
            raise ConfigError(
                f"{what} is written for the paper's 2-layer model; the run {self.path} has "
                f"model.n_layers = {cfg.model.n_layers} (use load_run and the hooked model's "
                "run_with_cache for deeper models)"
            )
        return cfg

    def fingerprint(self) -> str | None:
        """The config fingerprint of the run (empirical.runs.config.config_fingerprint;
        None: no config.toml)."""
        return config_fingerprint(self.read_config()) if self.is_run() else None

    def read_metrics(self) -> list[dict[str, Any]]:
        """metrics.jsonl's records ([] if absent), each checked to be a record of this run
        (a bad line is an error naming it and `python -m empirical repair`)."""
        if not self.metrics.exists():
            return []
        return read_metrics(self.metrics, self.fingerprint())

    def eval_sets_fix(self) -> str:
        """The command that rebuilds this run's evaluation sets."""
        if self.last_checkpoint.exists():
            return f"python -m empirical train --resume {self.path} --rebuild-eval-sets"
        return f"python -m empirical repair {self.path} --rebuild-eval-sets"

    def read_eval_sets(self, cfg=None):
        """The run's evaluation sets (EvalSets on the CPU; None: no eval_sets.pt), checked to
        be those of its task and seed (`cfg`: its RunConfig, default config.toml). A file
        that cannot be read or belongs to another task or seed is an EvalSetsError with the
        command that rebuilds it: accuracies are never computed on the wrong sets."""
        # imported here, the one torch import of RunDir: the options classes check run
        # directories with it before torch is imported (a bad argument answered at once)
        from empirical.task.eval_sets import EvalSetsError, eval_sets_mismatch, load_eval_sets

        if not self.eval_sets.exists():
            return None
        cfg = self.read_config() if cfg is None else cfg
        try:
            sets = load_eval_sets(self.eval_sets)
        except EvalSetsError as exc:
            raise EvalSetsError(f"{exc}; rebuild it: {self.eval_sets_fix()}") from None
        why = eval_sets_mismatch(sets, cfg.task, cfg.seed)
        if why is not None:
            raise EvalSetsError(
                f"{self.eval_sets} is not this run's: {why}; accuracies on it would be wrong. "
                f"Rebuild it: {self.eval_sets_fix()}"
            )
        return sets

    def check_model_file(self, ckpt: dict[str, Any], path: str | os.PathLike, cfg=None) -> None:
        """Refuse a checkpoint or snapshot (a loaded dict) that carries another run's config
        fingerprint; one without a fingerprint (written before they existed) is accepted."""
        found = ckpt.get("config_fingerprint") if isinstance(ckpt, dict) else None
        if not found:
            return
        cfg = self.read_config() if cfg is None else cfg
        expected = config_fingerprint(cfg)
        if found != expected:
            raise RunDirError(
                f"{path} does not belong to the run of {self.config} (config fingerprint "
                f"{str(found)[:12]}, the config's {expected[:12]}): one of them comes from "
                "another run; put the run's own file back"
            )

    def read_summary(self) -> dict[str, Any]:
        if not self.summary.is_file():
            raise RunDirError(f"{self.summary}: no summary (the run has not finished)")
        try:
            summary = json.loads(self.summary.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunDirError(
                f"{self.summary}: unreadable ({exc}); delete it: the next "
                f"`python -m empirical train --resume {self.path}` (or sweep) writes it again"
            ) from None
        if not isinstance(summary, dict):
            raise RunDirError(
                f"{self.summary}: not a summary (a JSON {type(summary).__name__}); delete it: "
                f"the next `python -m empirical train --resume {self.path}` writes it again"
            )
        return summary

    def read_stopped(self) -> dict[str, Any] | None:
        """What stopped.json says (None: the run did not stop on a non-finite loss)."""
        if not self.stopped.exists():
            return None
        try:
            stop = json.loads(self.stopped.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            stop = None
        if not isinstance(stop, dict) or not isinstance(stop.get("reason"), str):
            return {
                "step": None,
                "reason": f"{self.stopped} says the run stopped but is unreadable; resume it "
                f"with `python -m empirical train --resume {self.path}`",
            }
        return stop

    def label(self, cfg=None) -> str:
        """How figures and reports name the run: "NAME seed S" for a run trained here,
        "the paper authors' checkpoints (NAME config)" for an imported one."""
        if cfg is None:
            cfg = self.read_config()
        if self.imported.exists():
            return f"the paper authors' checkpoints, {cfg.name} config"
        return f"{cfg.name} seed {cfg.seed}"

    def read_imported(self) -> dict[str, Any] | None:
        if not self.imported.exists():
            return None
        try:
            return json.loads(self.imported.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunDirError(f"{self.imported}: unreadable ({exc})") from None


class RunDirError(UserError, FileNotFoundError):
    """A run directory, or a file in it, that is not there or cannot be read."""


class SweepDir(_Directory):
    """The files of a sweep or grid directory: one run directory per member under members/,
    and the summaries the sweep (results.json, summary.md, <name>.png) or grid (grid.json,
    grid.md, grid.png) writes from them."""

    SWEEP_TOML = "sweep.toml"
    MEMBERS = "members"
    RESULTS_JSON = "results.json"
    SUMMARY_MD = "summary.md"
    GRID_JSON = "grid.json"
    GRID_MD = "grid.md"
    GRID_FIGURE = "grid"  # grid.png (or .pdf / .svg)
    JOBS = "jobs"  # submitit's files, one folder per submission (experiments.sweep.cluster)
    CLAIMS = "claims"  # `python -m empirical claims`: one folder per variant (a population)
    CLAIMS_JSON = "claims.json"
    CLAIMS_MD = "claims.md"
    COMPARISON = "comparison"  # claims/comparison.{json,md}: the variants against each other
    WRITER_LOCK = RunDir.WRITER_LOCK

    sweep_toml = _file(SWEEP_TOML)
    members_dir = _file(MEMBERS)
    jobs_dir = _file(JOBS)
    writer_lock = _file(WRITER_LOCK)
    results_json = _file(RESULTS_JSON)
    summary_md = _file(SUMMARY_MD)
    grid_json = _file(GRID_JSON)
    grid_md = _file(GRID_MD)
    claims_dir = _file(CLAIMS)

    def member(self, dirname: str) -> RunDir:
        return RunDir(self.members_dir / dirname)

    def results_json_at(self, step: int) -> Path:
        """results.json of the summary at an earlier evaluation step (sweep --at-step)."""
        return self.path / f"results_step_{step:06d}.json"

    def summary_md_at(self, step: int) -> Path:
        return self.path / f"summary_step_{step:06d}.md"

    def figure(self, stem: str, fmt: str = "png") -> Path:
        return self.path / f"{stem}.{fmt}"

    def claims_of(self, variant: str) -> Path:
        """The folder of one variant's population claims (claims.json, claims.md, figures)."""
        return self.claims_dir / variant
