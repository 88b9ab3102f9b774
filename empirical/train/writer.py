"""Where a training session's evaluations, snapshots and checkpoints are done: in the step
loop (`InlineWriter`, the default) or in a process of their own beside it (`ProcessWriter`).

    writer = InlineWriter(members)               # or ProcessWriter(members)
    writer.write(point)                          # what is due after one step, every member
    for step, records in writer.results(): ...   # evaluations done since the last call
    writer.close()                               # everything written (ProcessWriter: waits)

A `Point` holds, per member, what the schedule asks for after a step: an evaluation (the
metrics record's training-side fields and the weights to evaluate), and the bytes of the
snapshot and checkpoint files (built by the training process at that step, so a file is the
same bytes whoever writes it). Both writers do a point's work in the same order (the
evaluation's metrics line, then the snapshot, then the checkpoint) and points in step order,
so the run directory goes through the same states: a checkpoint is never written before the
metrics lines up to its step, and a run killed at any time resumes as from the inline loop.

The process writer is for a CPU training on a machine with a spare core (`reproduce` uses
it): the step loop hands each point over in about a millisecond and goes on, and the
evaluations (67 s of the authors' config's 40 000-step run on this project's 2-core CPU)
run on the other core. Its evaluations are those of the inline loop, bit for bit (the same
forward on the same weights, on 1 thread; tests/test_writer.py compares the metrics logs).
It lags at most `max_pending` points; the step loop waits beyond that. An error in it is
raised in the training process at the next point, and the training stops. Ctrl-C reaches the
training process, which then lets the writer finish the points already handed over.
"""

from __future__ import annotations

import io
import multiprocessing
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from empirical.config_io import atomic_write_bytes
from empirical.metrics_log import append_metrics
from empirical.run_config import RunConfig
from empirical.rundir import RunDir


class WriterError(RuntimeError):
    """The writer process failed; the message holds its traceback."""


@dataclass
class Evaluation:
    """One member's evaluation at a step: the metrics record's training-side fields (step,
    train_loss, lr, elapsed_s, fingerprint), whether it reads every sequence, and how to get
    the model (`model_of()`: called when the evaluation runs, in the step loop); the process
    writer's `freeze` replaces it by the weights, as the bytes of torch.save."""

    record: dict
    full: bool
    model_of: Callable[[], object] | None = None
    weights: bytes | None = None


@dataclass
class MemberPoint:
    m: int
    evaluation: Evaluation | None = None
    # ("snapshots" or "checkpoints", path, the file's bytes), in the order to write them
    files: list[tuple[str, str, bytes]] = field(default_factory=list)


@dataclass
class Point:
    """What is due after `step`, member by member."""

    step: int
    members: list[MemberPoint]

    def has_evaluation(self) -> bool:
        return any(mp.evaluation is not None for mp in self.members)


@dataclass
class WriterMember:
    """What a writer needs of one member: its config and run directory, and (inline) its
    SetEvaluator and model."""

    cfg: RunConfig
    run: RunDir
    evaluator: object = None
    model: object = None


def _evaluate(member: WriterMember, ev: Evaluation) -> dict:
    """Evaluate `ev.weights` on the member's sets; append and return the metrics record."""
    if ev.model_of is not None:
        model = ev.model_of()
    else:
        import torch

        model = member.model
        model.load_state_dict(torch.load(io.BytesIO(ev.weights), weights_only=True))
    acc, loss, n = member.evaluator.evaluate(model, full=ev.full)
    base = dict(ev.record)
    fingerprint = base.pop("fingerprint", None)
    record = {**base, "acc": acc, "loss": loss}
    if not ev.full:
        record["eval_n"] = n
    if fingerprint:
        record["fingerprint"] = fingerprint
    append_metrics(member.run.metrics, record)
    return record


def _do_point(members: list[WriterMember], point: Point, spent: dict) -> dict[int, dict]:
    """The point's work in order: per member, evaluation, then its files. Returns the
    evaluated records by member."""
    records = {}
    for mp in point.members:
        if mp.evaluation is not None:
            t = time.perf_counter()
            records[mp.m] = _evaluate(members[mp.m], mp.evaluation)
            spent["evaluations"] += time.perf_counter() - t
        for kind, path, data in mp.files:
            t = time.perf_counter()
            atomic_write_bytes(path, data)
            spent[kind] += time.perf_counter() - t
    return records


def _new_spent() -> dict[str, float]:
    return {"evaluations": 0.0, "snapshots": 0.0, "checkpoints": 0.0}


class InlineWriter:
    """Each point done at once, in the step loop (the weights are the live model's)."""

    mode = "inline"

    def __init__(self, members: list[WriterMember]):
        self.members = members
        self.spent = _new_spent()
        self._done: list[tuple[int, dict[int, dict]]] = []

    def freeze(self, evaluation: Evaluation) -> None:
        """Nothing to do: the evaluation runs before the weights change."""

    def write(self, point: Point) -> None:
        records = _do_point(self.members, point, self.spent)
        if point.has_evaluation():
            self._done.append((point.step, records))

    def results(self) -> Iterator[tuple[int, dict[int, dict]]]:
        done, self._done = self._done, []
        yield from done

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def loop_seconds(self, handed_over: float) -> dict:
        """What the step loop spent on the writer (all of `handed_over`), by kind of work."""
        return {"writer": "inline", **{f"{k}_s": round(v, 3) for k, v in self.spent.items()}}


def _serialize_weights(state: dict) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in state.items()}, buffer)
    return buffer.getvalue()


class ProcessWriter:
    """The points done in a process of its own (see the module docstring)."""

    mode = "process"

    def __init__(self, members: list[WriterMember], max_pending: int = 8):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        specs = [(mb.cfg, str(mb.run.path)) for mb in members]
        self.proc = ctx.Process(target=serve, args=(child, specs), name="run-writer", daemon=True)
        self.proc.start()
        child.close()
        self.max_pending, self.pending = max_pending, 0
        self.close_wait_s = 0.0
        self.child_spent: dict | None = None
        self._done: list[tuple[int, dict[int, dict]]] = []

    def freeze(self, evaluation: Evaluation) -> None:
        """The evaluation's weights as they are now, as bytes to send (call it before the
        weights change: before the next step, or the next member of a batch)."""
        if evaluation.model_of is not None:
            evaluation.weights = _serialize_weights(evaluation.model_of().state_dict())
            evaluation.model_of = None

    def write(self, point: Point) -> None:
        for mp in point.members:
            if mp.evaluation is not None:
                self.freeze(mp.evaluation)
        self._send(("point", point))
        self.pending += 1
        self._receive(block=False)
        while self.pending > self.max_pending:
            self._receive(block=True)

    def results(self) -> Iterator[tuple[int, dict[int, dict]]]:
        if self.proc is not None:  # (once closed, everything is received)
            self._receive(block=False)
        done, self._done = self._done, []
        yield from done

    def close(self) -> None:
        """Wait until every point handed over is written, then end the process."""
        if self.proc is None:
            return
        t = time.perf_counter()
        self._send(("stop", None))
        while self.child_spent is None:
            self._receive(block=True)
        self.proc.join()
        self.proc = None
        self.close_wait_s += time.perf_counter() - t

    def abort(self) -> None:
        """The training is failing: let the writer finish what it has (it never writes half
        a file), for up to a minute, then end it."""
        if self.proc is None:
            return
        try:
            self.conn.send(("stop", None))
        except OSError:
            pass
        self.proc.join(60)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join()
        self.proc = None

    def loop_seconds(self, handed_over: float) -> dict:
        """What the step loop spent on the writer: `handed_over` (the session's time in
        write()) and the wait for it at the end; and the writer process's own times."""
        info = {"writer": "process", "evaluations_s": round(handed_over + self.close_wait_s, 3)}
        if self.child_spent:
            info["writer_process"] = {f"{k}_s": round(v, 3) for k, v in self.child_spent.items()}
        return info

    def _send(self, message) -> None:
        try:
            self.conn.send(message)
        except OSError:
            self._failed("the writer process is gone")

    def _receive(self, block: bool) -> None:
        while block or self.conn.poll():
            try:
                kind, *rest = self.conn.recv()
            except (EOFError, OSError):
                self._failed("the writer process ended unexpectedly")
            if kind == "done":
                step, records = rest
                self.pending -= 1
                if records:
                    self._done.append((step, records))
            elif kind == "closed":  # its last message: the pipe is at its end after it
                self.child_spent = rest[0]
                return
            elif kind == "error":
                self._failed(rest[0])
            block = False

    def _failed(self, why: str):
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
            elif proc.exitcode is not None:
                why += f" (exit status {proc.exitcode})"
        raise WriterError(f"the run writer process failed: {why}")


def serve(conn, specs: list[tuple[RunConfig, str]]) -> None:
    """The writer process: points from `conn`, done in order, until "stop" (or the training
    process is gone: the points received are still done)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the training process decides
    try:
        import torch
        from threadpoolctl import threadpool_limits

        from empirical.allocator import retain_freed_memory
        from empirical.model import AssignAddTransformer
        from empirical.train.evaluate import SetEvaluator

        retain_freed_memory()
        torch.set_num_threads(1)
        threadpool_limits(limits=1, user_api="blas")
        members = []
        for cfg, path in specs:
            run = RunDir(path)
            sets = run.read_eval_sets(cfg)
            tc = cfg.train
            members.append(
                WriterMember(
                    cfg,
                    run,
                    SetEvaluator(sets, tc.eval_batch_size, tc.eval_subsample, cfg.seed),
                    AssignAddTransformer(cfg.built_model_config(), seed=0),
                )
            )
        spent = _new_spent()
        while True:
            try:
                kind, point = conn.recv()
            except (EOFError, OSError):  # the training process is gone, everything done
                return
            if kind == "stop":
                conn.send(("closed", spent))
                return
            records = _do_point(members, point, spent)
            conn.send(("done", point.step, records))
    except Exception:  # noqa: BLE001 - any failure is reported to the training process
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
