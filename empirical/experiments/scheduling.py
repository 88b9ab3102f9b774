"""Where `reproduce`'s stages run: background processes beside the training, their threads,
the training's threads, and our compare-qk following the training on idle CPU time.

    with BackgroundProcesses(background_workers(cores)) as background:
        job = background.submit(stage, *args)      # in a spawned process (in_background_process)
        ...                                        # the training, here; then background.stop.set()
        job.get()

A background process runs on worker_threads torch and BLAS threads; the training runs on one
thread while they share the machine and on every core once they are done (ThreadWidening).
On leaving the `with`, the background processes are let end (close, join), so each runs its
exit handlers: a process killed instead (Pool.terminate) leaves the semaphores it made (tqdm's
lock, in the paper's run's import and evaluation) to the resource tracker, which ended the
main job with 'There appear to be 1 leaked semaphore objects to clean up at shutdown'. Only
when the body fails are they terminated.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable

from disentangled.errors import UserError


def say(text: str) -> None:
    """A progress line of `reproduce`, on stderr."""
    print(f"[reproduce] {text}", file=sys.stderr, flush=True)


def background_workers(cores: int) -> int:
    """Worker processes beside the training process on a machine with `cores` CPU cores:
    1 up to 2 cores (theory, paper's run, then our compare-qk, in turn), 2 on 3-4 (our
    compare-qk need not wait for the theory), 4 from 5 cores on (theory tests, theory report,
    the paper's run and our compare-qk each in its own process, as on a GPU machine)."""
    return 1 if cores <= 2 else 2 if cores <= 4 else 4


def worker_threads(cores: int) -> int:
    """Torch threads of each background process: the cores shared evenly between the training
    process and the background_workers (1 on 2-4 cores; 3 on a 16-core GPU machine)."""
    return max(1, cores // (background_workers(cores) + 1))


def subprocess_env() -> dict[str, str]:
    """The environment of a stage's subprocess: this process's torch threads (a background
    process's worker_threads) unless OMP_NUM_THREADS is set: on a 16-core machine, five
    processes of 16 threads each slowed the theory report 4x."""
    import torch

    threads = str(torch.get_num_threads())
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **os.environ}


def in_background_process(fn, *args):
    """fn(*args) in a background process, on worker_threads torch threads and as many BLAS
    threads (numpy's and scipy's OpenBLAS, limited by threadpoolctl). Unlimited, the BLAS
    starts a thread per core, and on the 2-core CPU it made our run's compare-qk slower and
    took CPU from the training beside it: 86-90 s and 84-87 s of CPU against 55-57 s and 53-54
    s on one BLAS thread (`python benchmarks/bench_allocator.py --run runs/authors/seed0`,
    2026-11-27). Freed memory is kept there (empirical.allocator): compare-qk runs here."""
    import torch
    from threadpoolctl import threadpool_limits

    from empirical.allocator import retain_freed_memory

    retain_freed_memory()
    threads = worker_threads(os.cpu_count() or 1)
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        return fn(*args)


class BackgroundProcesses:
    """`workers` spawned processes for stages beside the training (`submit`), and `stop`, an
    event (a Manager's: it crosses processes) that the training's end sets. A context
    manager: leaving it normally lets the processes end cleanly; leaving it on an error
    terminates them (the module docstring)."""

    def __init__(self, workers: int):
        spawn = multiprocessing.get_context("spawn")
        self.pool = spawn.Pool(workers)
        self.manager = spawn.Manager()
        self.stop = self.manager.Event()

    def submit(self, fn: Callable, *args):
        """fn(*args) in a background process (in_background_process); an AsyncResult."""
        return self.pool.apply_async(in_background_process, (fn, *args))

    def __enter__(self) -> BackgroundProcesses:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:  # every job is done: each process ends and cleans up
                self.pool.close()
                self.pool.join()
            else:  # this process is failing: no waiting for theirs
                self.pool.terminate()
        finally:
            self.manager.shutdown()


@contextlib.contextmanager
def idle_priority():
    """This process on idle CPU time only, for the duration (Linux SCHED_IDLE; elsewhere the
    lowest nice level), then back where the system allows: work that follows the training must
    not take cores from it. On the 2-core CPU, following at normal priority while the training
    ran on both cores slowed its steps by more than the following saved (2026-11-27)."""
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
    process) writes them, on idle CPU time only, until `stop` is set (the training has ended):
    {step: analysis} for compare_qk's `done` (empirical.bridge.compare_qk.follow). It gains where a
    core is spare (3 or more: its own worker beside the training); on 2 cores the 2-thread
    training leaves it almost none (4 of 80 snapshots in the main job, 2026-11-27)."""
    from empirical.bridge.compare_qk import Options
    from empirical.bridge.compare_qk.follow import SnapshotInputs, follow_snapshots

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
    stages have finished, the rest of a CPU training runs on every core
    (`os.cpu_count()`; 1 thread while they share the machine). The step is the same, bit for
    bit, on any thread count (tests/test_reproduce.py), so when the switch happens cannot
    change a number; on this project's 2-core CPU 2 threads take 9-17% off a step
    (benchmarks/bench_threads.py). `restore()` puts the count back for the stages after."""

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
