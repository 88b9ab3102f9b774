"""Another process that holds a directory's writer lock while a test runs (for
tests/test_run_lock.py and tests/test_bad_inputs.py).

    with held_elsewhere(run_dir) as pid:     # a forked child holds writer_lock(run_dir)
        ...                                  # this process is refused: "... by PID <pid> ..."

The child is forked from the test process (no interpreter start: milliseconds), takes the
lock with empirical.runs.lock.writer_lock, says so through a pipe and waits until the test
closes its end; `kill()` instead ends it with SIGKILL, as a crash would (no release).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path


class Holder:
    """The forked child that holds the lock (its pid, and a way to kill it)."""

    def __init__(self, pid: int, release_fd: int):
        self.pid = pid
        self.release_fd = release_fd
        self.done = False

    def kill(self) -> None:
        """SIGKILL: the child dies holding the lock, as a crashed writer does."""
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.done = True

    def stop(self) -> None:
        """Let the child release the lock and exit."""
        with contextlib.suppress(OSError):
            os.close(self.release_fd)
        if not self.done:
            os.waitpid(self.pid, 0)
            self.done = True


@contextlib.contextmanager
def held_elsewhere(
    directory: str | os.PathLike, env: dict[str, str] | None = None
) -> Iterator[Holder]:
    """A forked child holding the writer lock of `directory` for the body (`env`: variables
    set in the child)."""
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lock, say so, wait for the parent to close its end
        code = 1
        try:
            os.close(ready_r)
            os.close(release_w)
            os.environ.update(env or {})
            from empirical.runs.lock import writer_lock

            with writer_lock(Path(directory)):
                os.write(ready_w, b"1")
                os.read(release_r, 1)
            code = 0
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(release_r)
    holder = Holder(pid, release_w)
    try:
        if os.read(ready_r, 1) != b"1":
            raise RuntimeError(f"the lock holder could not take the lock of {directory}")
        yield holder
    finally:
        os.close(ready_r)
        holder.stop()
