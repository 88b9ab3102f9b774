"""A training session in named phases: what `run_training` does, one method a phase.

    result = run_training(trainees, SingleLearner(cfg, device))     # one run
    result = run_training(trainees, BatchLearner(cfgs, device))     # M members at once

`check` (every checkpoint and evaluation set, before any write), `prepare_directories`,
`open_data` (training streams, evaluation sets built and saved once), `restore` (from the
common checkpoint step, or a fresh start), `train` (the step loop and its evaluations,
snapshots and checkpoints), `finish` (summary.json, training_curves.png). docs/training.md.
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from empirical.config.io import config_to_toml
from empirical.model.checkpoint import save_model
from empirical.report.files import atomic_write_bytes
from empirical.runs.config import config_fingerprint
from empirical.runs.lock import writer_locks
from empirical.runs.metrics_log import read_metrics, truncate_metrics
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import build_eval_sets
from empirical.task.eval_sets import save_eval_sets as _save_eval_sets
from empirical.task.pairs import training_generator
from empirical.task.sampler import run_training_sampler
from empirical.train.batches import BatchStream
from empirical.train.breakdown import restricted_breakdown
from empirical.train.engine import (
    LossWindows,
    Trainee,
    TrainingError,
    checkpoint_step,
    exploding,
    preflight,
    remove_stale_temporaries,
    restore_data_generator,
    write_stopped,
)
from empirical.train.evaluate import SetEvaluator, evaluate_and_log, is_full_evaluation
from empirical.train.schedule import learning_rate, schedule_of
from empirical.train.state import save_training_state
from empirical.train.summary import write_summary
from empirical.train.tensorboard import log_record


@dataclass
class SessionResult:
    """What a training session ended with, per member."""

    step: int
    records: list[dict]  # each member's last metrics record
    stopped: list[str | None]  # each member's stop reason (None: it trained on)
    elapsed: list[float]
    finished: bool  # reached train.steps (not stopped early by stop_at)


def progress_accuracy(acc: dict[str, float]) -> float:
    """The progress bar's number without a `metric`: the paper's headline set (0var/ind), else
    the last set evaluated (a family without it: its largest, hardest set); nan if none."""
    if "0var/ind" in acc or not acc:
        return acc.get("0var/ind", float("nan"))
    return acc[list(acc)[-1]]


class TrainingSession:
    """The state one session shares between its phases (see the module docstring)."""

    def __init__(
        self, trainees: list[Trainee], learner, *, progress: bool = True,
        on_eval: Callable[[int, list[dict]], None] | None = None,
        labels: list[str] | None = None, metric: Callable[[int, dict], float] | None = None,
        figures: bool = True,
    ):  # fmt: skip
        self.started = time.perf_counter()
        self.figures = figures
        self.trainees = trainees
        self.learner = learner
        self.progress, self.on_eval, self.metric = progress, on_eval, metric
        self.cfgs = [t.cfg for t in trainees]
        self.runs = [t.run for t in trainees]
        self.M = len(trainees)
        self.tc = self.cfgs[0].train
        self.device = learner.device
        self.labels = labels or [r.name for r in self.runs]
        self.fingerprints = [config_fingerprint(c) for c in self.cfgs]
        starts = [checkpoint_step(r) for r in self.runs]
        if len(set(starts)) != 1:
            raise TrainingError(f"members at different checkpoint steps {starts}")
        self.step = self.first_step = starts[0]
        self.alive = [True] * self.M
        self.stopped: list[str | None] = [None] * self.M
        self.last_records: list[dict] = [{} for _ in range(self.M)]
        self.spent = {"evaluations": 0.0, "snapshots": 0.0, "checkpoints": 0.0}
        self.bar = None
        self.t0 = time.perf_counter()

    # -- phases ----------------------------------------------------------------------------

    def check(self, rebuild_eval_sets: bool) -> None:
        """Phase 1: every trainee's checkpoint and evaluation sets (preflight)."""
        checked = [preflight(t, self.step, rebuild_eval_sets) for t in self.trainees]
        self.checkpoints = [ckpt for ckpt, _ in checked]
        self.loaded_sets = [sets for _, sets in checked]

    def prepare_directories(self) -> None:
        """Phase 2: each run directory with its config.toml, checkpoints/ and snapshots/
        (stale temporaries removed)."""
        for t in self.trainees:
            t.run.path.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(t.run)
            atomic_write_bytes(t.run.config, config_to_toml(t.cfg).encode())
            t.run.checkpoints_dir.mkdir(exist_ok=True)
            if self.tc.snapshot_every:
                t.run.snapshots_dir.mkdir(exist_ok=True)

    def open_data(self) -> None:
        """Phase 3: each member's training stream and evaluation sets (built and saved when
        the run has none yet)."""
        tc = self.tc
        self.streams, self.generators, self.evaluators = [], [], []
        for cfg in self.cfgs:
            sampler = run_training_sampler(cfg.task, cfg.seed, self.device)
            self.generators.append(training_generator(cfg.seed, self.device))
            self.streams.append(
                BatchStream(sampler, self.generators[-1], tc.batch_size, tc.sample_chunk)
            )
        for t, loaded in zip(self.trainees, self.loaded_sets, strict=True):
            if loaded is None:
                loaded = build_eval_sets(t.cfg.task, t.cfg.seed, device="cpu")
                _save_eval_sets(loaded, t.run.eval_sets)
            sets = {name: batch.to(self.device) for name, batch in loaded.items()}
            self.evaluators.append(
                SetEvaluator(sets, tc.eval_batch_size, tc.eval_subsample, t.cfg.seed)
            )

    def restore(self) -> None:
        """Phase 4: learner, data generators, loss windows and metrics log from the common
        checkpoint step, or a fresh start (torch seeded, no metrics log)."""
        M, device = self.M, self.device
        self.windows = [LossWindows() for _ in range(M)]
        self.elapsed_before = [0.0] * M
        if self.step > 0:
            self.learner.load(self.checkpoints)
            for m, ckpt in enumerate(self.checkpoints):
                restore_data_generator(
                    self.generators[m], ckpt["data_rng_state"], self.cfgs[m].seed, self.step
                )
                self.windows[m] = LossWindows.from_checkpoint(ckpt)
                self.elapsed_before[m] = float(ckpt["elapsed_s"])
                truncate_metrics(self.runs[m].metrics, self.step, self.fingerprints[m])
            torch.set_rng_state(self.checkpoints[0]["torch_rng_state"])
        else:
            torch.manual_seed(self.cfgs[0].seed)
            for r in self.runs:
                r.metrics.unlink(missing_ok=True)
        # device-side accumulators (no host sync in the step)
        w = self.windows

        def sums(values):
            return torch.tensor(values, dtype=torch.float64, device=device)

        self.eval_acc = sums([x.eval_sum for x in w])
        self.ckpt_acc = sums([x.ckpt_sum for x in w])
        self.total_acc = sums([x.total for x in w])
        self.eval_n, self.ckpt_n = w[0].eval_n, w[0].ckpt_n
        self.first_bad = torch.full((M,), -1, dtype=torch.long, device=device)
        self.bad_loss = torch.zeros(M, dtype=torch.float64, device=device)

    def train(self, stop_at: int | None) -> bool:
        """Phase 5: steps to train.steps (or `stop_at`), with the schedule's evaluations,
        snapshots and checkpoints; returns whether train.steps was reached."""
        tc = self.tc
        self.bar = tqdm(
            total=tc.steps, initial=self.step, disable=not self.progress, desc=self._title()
        )
        self.t0 = time.perf_counter()
        try:
            if self.step == 0:
                with self._timed("evaluations"):
                    self.evaluate_all(0, first=True)
                if tc.snapshot_every:
                    with self._timed("snapshots"):
                        self.snapshot_all(0)
            while self.step < tc.steps:
                self.train_step()
                self.on_schedule()
                if stop_at is not None and stop_at <= self.step < tc.steps:
                    return False
            return True
        finally:
            self.bar.close()
            self.loop_s = time.perf_counter() - self.t0

    def finish(self) -> None:
        """Phase 6: summary.json and training_curves.png (unless figures is False) of every
        member that trained on."""
        session = {
            "steps": self.step - self.first_step,
            "step_mode": _step_mode(self.learner),
            "setup_s": round(self.t0 - self.started, 3),
            "training_steps_s": round(self.loop_s - sum(self.spent.values()), 3),
            **{f"{what}_s": round(seconds, 3) for what, seconds in self.spent.items()},
        }
        elapsed = self.elapsed()
        for m in range(self.M):
            if self.alive[m]:
                model = self.learner.model_of(m)
                sets = self.evaluators[m].sets
                breakdown = restricted_breakdown(model, sets, self.cfgs[m].task.L)
                records = read_metrics(self.runs[m].metrics, self.fingerprints[m])
                write_summary(
                    self.cfgs[m], self.runs[m].path, records, elapsed[m], self.device,
                    breakdown, session=session, figures=self.figures,
                )  # fmt: skip

    def result(self, finished: bool) -> SessionResult:
        return SessionResult(self.step, self.last_records, self.stopped, self.elapsed(), finished)

    # -- one step and the schedule -----------------------------------------------------------

    def train_step(self) -> None:
        """One training step of every living member; losses summed on the device."""
        batches = [stream.next() for stream in self.streams]
        if batches[0].has_targets:  # labels per position (the graph family): one member
            losses = self.learner.train_step_targets(batches[0], self.alive, self.step)
        else:
            tokens = torch.stack([b.tokens for b in batches])
            labels = torch.stack([b.labels for b in batches])
            losses = self.learner.train_step(tokens, labels, self.alive, self.step)
        detached = losses.detach().double()
        fresh_bad = ~torch.isfinite(detached) & (self.first_bad < 0)
        self.first_bad.masked_fill_(fresh_bad, self.step + 1)
        self.bad_loss.copy_(torch.where(fresh_bad, detached, self.bad_loss))
        self.step += 1
        for acc in (self.eval_acc, self.ckpt_acc, self.total_acc):
            acc.add_(detached)
        self.eval_n += 1
        self.ckpt_n += 1
        self.bar.update(1)

    def on_schedule(self) -> None:
        """The evaluation, snapshot and checkpoint due after the current step, if any."""
        tc, step = self.tc, self.step
        at_eval = step % tc.eval_every == 0 or step == tc.steps
        at_snapshot = bool(tc.snapshot_every) and step % tc.snapshot_every == 0
        at_checkpoint = step % tc.checkpoint_every == 0 or step == tc.steps
        if not (at_eval or at_snapshot or at_checkpoint):
            return
        self.check_finite()
        self._raise_if_all_stopped()
        self.sync_windows()
        if at_eval:
            with self._timed("evaluations"):
                self.evaluate_all(step, first=False)
            self.eval_acc.zero_()
            self.eval_n = 0
            for w in self.windows:
                w.eval_sum, w.eval_n = 0.0, 0
        if at_snapshot:
            with self._timed("snapshots"):
                self.snapshot_all(step)
        if at_checkpoint:
            with self._timed("checkpoints"), signals_held():
                self.checkpoint_all(step)
            self.ckpt_n = 0
            self._raise_if_all_stopped()

    def evaluate_all(self, at: int, first: bool) -> None:
        full = is_full_evaluation(self.tc, at)
        for m in range(self.M):
            if not self.alive[m]:
                continue
            w = self.windows[m]
            train_loss = None if first or w.eval_n == 0 else w.eval_sum / w.eval_n
            lr = 0.0 if first else self.lr_of(m, at - 1)
            self.last_records[m] = evaluate_and_log(
                self.learner.model_of(m), self.evaluators[m], self.runs[m].metrics, at,
                train_loss, lr, self.elapsed_of(m), self.fingerprints[m], full=full,
            )  # fmt: skip
            if self.cfgs[m].train.tensorboard:  # the record as scalars, beside metrics.jsonl
                log_record(self.runs[m].path, self.last_records[m])
        if self.on_eval is not None:
            self.on_eval(at, self.last_records)
        if self.progress and self.last_records[0]:
            text = " ".join(
                f"{lab}:{self._value_of(m, rec['acc']):.2f}"
                for m, (lab, rec) in enumerate(zip(self.labels, self.last_records, strict=True))
                if rec
            )
            self.bar.set_postfix_str(text, refresh=False)

    def snapshot_all(self, at: int) -> None:
        for m in range(self.M):
            if self.alive[m]:
                extra = {"step": at, "config_fingerprint": self.fingerprints[m]}
                save_model(self.learner.model_of(m), self.runs[m].snapshot(at), extra)

    def checkpoint_all(self, at: int) -> None:
        """Every living member's checkpoint at step `at` (call it under `signals_held()`: a
        batch whose members were checkpointed at different steps resumes as separate batches)."""
        tc = self.tc
        for m in range(self.M):
            if not self.alive[m]:
                continue
            w = self.windows[m]
            mean = w.ckpt_sum / w.ckpt_n if w.ckpt_n else float("nan")
            classes = self.cfgs[m].task.n_classes  # the loss of chance: ln(classes)
            if w.ckpt_n and exploding(mean, w.history, tc.divergence_factor, classes):
                self.stop_member(
                    m, at, mean,
                    f"mean training loss {mean:.4g} over the {w.ckpt_n} steps to here exploded "
                    f"(> {tc.divergence_factor:g} x the median {statistics.median(w.history):.4g}"
                    " of the earlier checkpoint windows, and above chance)",
                )  # fmt: skip
                continue
            if w.ckpt_n:
                w.history.append(mean)
            w.ckpt_sum, w.ckpt_n = 0.0, 0
            self.ckpt_acc[m] = 0.0
            save_training_state(
                self.runs[m].last_checkpoint, self.learner.model_of(m),
                self.learner.optimizer_state(m), self.generators[m], at, self.cfgs[m],
                self.elapsed_of(m), w.to_dict(),
            )  # fmt: skip

    # -- members' losses and stops ------------------------------------------------------------

    def lr_of(self, m: int, at: int) -> float:
        return learning_rate(at, self.cfgs[m].train.lr, **schedule_of(self.tc))

    def sync_windows(self) -> None:
        """The device-side loss sums copied into each member's LossWindows (one transfer)."""
        ev, ck = self.eval_acc.tolist(), self.ckpt_acc.tolist()
        tot = self.total_acc.tolist()
        for m, w in enumerate(self.windows):
            w.eval_sum, w.ckpt_sum, w.total = ev[m], ck[m], tot[m]
            w.eval_n, w.ckpt_n = self.eval_n, self.ckpt_n

    def stop_member(self, m: int, at: int, loss: float, why: str) -> None:
        self.alive[m] = False
        lr = self.lr_of(m, max(at - 1, 0))
        self.stopped[m] = write_stopped(self.runs[m], at, loss, lr, why)
        self.bar.write(f"{self.labels[m]}: {why} at step {at}: stopped")

    def check_finite(self) -> None:
        """Stop every member whose loss became non-finite since the last check."""
        bad = self.first_bad.tolist()
        if max(bad) < 0:
            return
        values = self.bad_loss.tolist()
        for m in range(self.M):
            if self.alive[m] and bad[m] >= 0:
                self.stop_member(m, bad[m], values[m], f"loss became {values[m]}")

    def elapsed_of(self, m: int) -> float:
        return self.elapsed_before[m] + time.perf_counter() - self.t0

    def elapsed(self) -> list[float]:
        return [self.elapsed_of(m) for m in range(self.M)]

    def _raise_if_all_stopped(self) -> None:
        if not any(self.alive):
            raise TrainingError(_all_stopped(self.stopped, self.runs))

    def _value_of(self, m: int, acc: dict) -> float:
        return self.metric(m, acc) if self.metric is not None else progress_accuracy(acc)

    @contextlib.contextmanager
    def _timed(self, what: str):
        start = time.perf_counter()
        yield
        self.spent[what] += time.perf_counter() - start

    def _title(self) -> str:
        cfg = self.cfgs[0]
        return f"train {cfg.name} s{cfg.seed}" if self.M == 1 else f"batch of {self.M}"


def run_training(
    trainees: list[Trainee], learner, *, progress: bool = True, stop_at: int | None = None,
    on_eval: Callable[[int, list[dict]], None] | None = None, labels: list[str] | None = None,
    metric: Callable[[int, dict], float] | None = None, rebuild_eval_sets: bool = False,
    figures: bool = True,
) -> SessionResult:  # fmt: skip
    """Train every trainee with `learner` (which holds their models) from their common
    checkpoint step (0: fresh) to train.steps, phase by phase, each directory under its writer
    lock (empirical.runs.lock; re-entrant). stop_at: end after that step (as if killed right
    after it). on_eval(step, records): after each evaluation. labels / metric(m, acc): the
    progress bar's per-member text and value. rebuild_eval_sets: build eval_sets.pt again.
    figures: False leaves out training_curves.png (train.summary.write_training_curves draws
    it later)."""
    with writer_locks([t.run for t in trainees]):
        session = TrainingSession(
            trainees, learner, progress=progress, on_eval=on_eval, labels=labels, metric=metric,
            figures=figures,
        )
        session.check(rebuild_eval_sets)  # before any write
        session.prepare_directories()
        session.open_data()
        session.restore()
        finished = session.train(stop_at)
        if finished:
            session.finish()
    return session.result(finished)


def _step_mode(learner) -> str:
    """How the last session ran its steps: "cuda_graph", "compiled:<mode>" or "eager"."""
    if learner.graphed is not None and learner.graphed.graph is not None:
        return "cuda_graph"
    if learner.tc.compile != "none":
        return f"compiled:{learner.tc.compile}"
    return "eager"


def _all_stopped(stopped: list[str | None], runs: list[RunDir]) -> str:
    if len(runs) == 1:
        return stopped[0] or "the run stopped"
    return "every member stopped: " + "; ".join(
        f"{r.name}: {s}" for r, s in zip(runs, stopped, strict=True) if s
    )


@contextlib.contextmanager
def signals_held():
    """SIGTERM and SIGINT held back (raised again on exit) while the block runs, so a stop
    during a batch's checkpoint writes leaves every member at the same step (main thread
    only, where Python runs signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = [signal.SIGTERM, signal.SIGINT]
    arrived: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: arrived.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)
