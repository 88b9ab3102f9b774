"""A training session's evaluations and writes, in a thread beside the training steps.

    writer = BackgroundWriter()
    writer.submit(job)            # job() runs in the writer's thread, after every earlier job
    for result in writer.collect():   # results of the jobs finished so far, in order
        ...
    for result in writer.drain():     # wait for every job submitted; their results, in order
        ...
    writer.close()

Jobs run one at a time, in the order submitted, so what they write (metrics.jsonl records,
snapshots, checkpoints) is written in the same order as without the thread; a job reads only
what was copied for it when it was submitted (the weights, the optimiser state, the RNG
states), never the live training state, so the numbers are the same too (tested). After a job
fails, the writer runs none of the later jobs (a checkpoint must not be written after the
evaluation before it failed), and the next `collect`, `drain` or `submit` raises the error.
`submit` blocks while `max_pending` jobs are waiting, which bounds the copies in memory.

Why: on a CPU with a core the training step does not use (it gains little from a second
thread), an evaluation of every set (1 000-10 000 sequences each) in the step loop stops the
training for the evaluation's whole time; in this thread it runs on the spare core while the
steps go on (empirical.train.session, `background=True`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_STOP = object()


class BackgroundWriter:
    """One worker thread that runs submitted jobs in order (see the module docstring)."""

    def __init__(self, max_pending: int = 8, name: str = "training-writer"):
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self._jobs: queue.Queue = queue.Queue(maxsize=max_pending)
        self._results: queue.Queue = queue.Queue()
        self._submitted = 0
        self._returned = 0
        self._error: BaseException | None = None
        self.busy_s = 0.0  # seconds the worker spent running jobs
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            if self._error is not None:  # a job failed: the later ones are not run
                self._results.put((False, None))
                continue
            start = time.perf_counter()
            try:
                result = (True, job())
            except BaseException as exc:  # handed to the training thread
                self._error = exc
                result = (False, None)
            self.busy_s += time.perf_counter() - start
            self._results.put(result)

    def _raise_if_failed(self) -> None:
        error = self._error
        if error is not None:
            if not isinstance(error, _Failed):  # raised once; later jobs skipped, calls raise
                self._error = _Failed()
            raise error

    def submit(self, job: Callable[[], Any]) -> None:
        """Run `job()` after every job submitted before it (blocks while the queue is full)."""
        self._raise_if_failed()
        if not self._thread.is_alive():
            raise RuntimeError("the background writer is closed")
        self._jobs.put(job)
        self._submitted += 1

    def pending(self) -> int:
        """Jobs submitted whose results have not been returned yet."""
        return self._submitted - self._returned

    def _results_of(self, block: bool) -> Iterator[Any]:
        while self._returned < self._submitted:
            try:
                ok, result = self._results.get(block=block)
            except queue.Empty:
                return
            self._returned += 1
            if not ok:
                self._raise_if_failed()
                continue
            yield result

    def collect(self) -> list[Any]:
        """The results of the jobs finished since the last call, in order (does not wait)."""
        results = list(self._results_of(block=False))
        self._raise_if_failed()
        return results

    def drain(self) -> list[Any]:
        """Wait for every job submitted; their results not returned yet, in order."""
        results = list(self._results_of(block=True))
        self._raise_if_failed()
        return results

    def close(self) -> None:
        """Let the jobs submitted finish, then stop the thread (idempotent)."""
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()


class _Failed(RuntimeError):
    """A job of this writer failed earlier (raised once); later jobs were not run."""

    def __init__(self):
        super().__init__("an earlier job of the background writer failed; later jobs were not run")
