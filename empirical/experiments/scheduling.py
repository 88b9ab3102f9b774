"""Where `reproduce`'s stages run: background processes beside the training (each on
worker_threads torch and BLAS threads), the training's threads (one while they share the
machine, every core once they are done: ThreadWidening), and our compare-qk following the
training on idle CPU time.

    with BackgroundProcesses(background_workers(cores)) as background:
        job = background.submit(stage, *args)      # in a spawned process (in_background_process)
        ...                                        # the training, here; then background.stop.set()
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from multiprocessing.managers import SyncManager

from disentangled.errors import UserError


def say(text: str) -> None:
    """A progress line of `reproduce`, on stderr."""
    print(f"[reproduce] {text}", file=sys.stderr, flush=True)


def background_workers(cores: int) -> int:
    """Worker processes beside the training on `cores` CPU cores: 1 up to 2 cores (every stage
    in turn), 2 on 3-4 (our compare-qk need not wait for the theory), 4 from 5 cores on (each
    independent stage in its own process)."""
    return 1 if cores <= 2 else 2 if cores <= 4 else 4


def worker_threads(cores: int) -> int:
    """Torch threads of each background process: the cores shared evenly between the training
    process and the background_workers (1 on 2-4 cores; 3 on a 16-core GPU machine)."""
    return max(1, cores // (background_workers(cores) + 1))


def subprocess_env() -> dict[str, str]:
    """A stage's subprocess's environment: this process's torch threads unless OMP_NUM_THREADS
    is set (on 16 cores, five processes of 16 threads each slowed the theory report 4x)."""
    import torch

    threads = str(torch.get_num_threads())
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **os.environ}


def in_background_process(fn, *args):
    """fn(*args) in a background process, on worker_threads torch threads and as many BLAS
    threads (threadpoolctl: a BLAS thread per core slowed compare-qk and the training beside
    it, docs/benchmarks.md, bench_allocator), keeping freed memory (empirical.train.allocator)."""
    import torch
    from threadpoolctl import threadpool_limits

    from empirical.train.allocator import retain_freed_memory

    retain_freed_memory()
    threads = worker_threads(os.cpu_count() or 1)
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        return fn(*args)


def exit_with_parent(parent: int, every: float = 1.0) -> None:
    """In a worker process: end it (os._exit) once `parent`, the process that started it, is
    gone (killed, so that it could not terminate its workers), checked every `every` seconds
    on a daemon thread."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class BackgroundProcesses:
    """`workers` spawned processes for stages beside the training (`submit`), and `stop`, an
    event (a Manager's: it crosses processes) that the training's end sets. Leaving the
    context normally lets the processes end cleanly; leaving it on an error terminates them;
    a killed reproduce takes them with it (exit_with_parent)."""

    def __init__(self, workers: int):
        spawn = multiprocessing.get_context("spawn")
        me = (os.getpid(),)
        self.pool = spawn.Pool(workers, initializer=exit_with_parent, initargs=me)
        self.manager = SyncManager(ctx=spawn)
        self.manager.start(exit_with_parent, me)
        self.stop = self.manager.Event()

    def submit(self, fn: Callable, *args):
        """fn(*args) in a background process (in_background_process); an AsyncResult."""
        return self.pool.apply_async(in_background_process, (fn, *args))

    def __enter__(self) -> BackgroundProcesses:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:  # every job is done: each process ends and cleans up
                # (terminated, one leaves its semaphores, tqdm's lock, to the resource tracker:
                # 'There appear to be 1 leaked semaphore objects to clean up at shutdown')
                self.pool.close()
                self.pool.join()
            else:  # this process is failing: no waiting for theirs
                self.pool.terminate()
        finally:
            self.manager.shutdown()


@contextlib.contextmanager
def idle_priority():
    """This process on idle CPU time only, for the duration (Linux SCHED_IDLE; elsewhere the
    lowest nice level): at normal priority, on 2 cores, following the training slowed its steps
    by more than the following saved (2026-11-27)."""
    before = None
    try:
        if hasattr(os, "SCHED_IDLE"):
            before = (os.sched_getscheduler(0), os.sched_getparam(0))
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        else:
            os.nice(19)
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, before[0], before[1])


def follow_training(run, stop) -> dict:
    """Our run's compare-qk of each snapshot that has a successor, as the training (another
    process) writes them, on idle CPU time, until `stop` is set: {step: analysis} for
    compare_qk's `done` (empirical.bridge.compare_qk.follow)."""
    from empirical.bridge.compare_qk.follow import SnapshotInputs, follow_snapshots
    from empirical.bridge.compare_qk.options import Options

    while not (stop.is_set() or run.is_run()):  # until the training writes its config
        time.sleep(1.0)
    if not run.is_run():
        return {}
    try:
        with idle_priority():
            return follow_snapshots(SnapshotInputs.of(run.path, Options(progress=False)), stop)
    except UserError:  # an unreadable run: the compare-qk stage meets it and says why
        return {}


class ThreadWidening:
    """run_training's on_eval for reproduce's training: once `done()` says the background
    stages have finished, the rest of a CPU training runs on every core (the step is the same
    bit for bit on any thread count: docs/training.md). `restore()` puts the count back."""

    def __init__(self, cfg, done: Callable[[], bool] | None):
        from empirical.train.engine import resolve_device

        self.done, self.before, self.at = done, None, None
        self.cores = os.cpu_count() or 1
        cpu = resolve_device(cfg.train.device).type == "cpu"
        self.active = done is not None and cpu and self.cores > 1

    def __call__(self, step: int, records) -> None:
        if not self.active or not self.done():
            return
        import torch

        self.active = False  # decided once, when the background is done
        self.before = torch.get_num_threads()
        if self.cores > self.before:
            torch.set_num_threads(self.cores)
            self.at = step
            say(f"background stages done: training on {self.cores} threads from step {step}")

    def restore(self) -> None:
        if self.at is not None:
            import torch

            torch.set_num_threads(self.before)

    def note(self) -> str:
        return "" if self.at is None else f"; on {self.cores} threads from step {self.at}"
