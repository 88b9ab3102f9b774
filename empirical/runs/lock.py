"""One writer per run or sweep directory: `with writer_lock(run_dir, "--run-dir"): ...writes...`.
flock(LOCK_EX | LOCK_NB) on its `writer.lock`, released by the OS when the process ends, however
it ends. The holder writes its PID, host, command and start into the file; another writer is
refused with one line naming it (WriterLockError) and writes nothing. A file naming a process
gone from this host is stale (a killed holder's): not shown. Re-entrant within a process.
Release removes the file and the directories the lock made, if empty. Without a working flock
(some network file systems): unlocked, after a warning. Readers never lock (docs/robustness.md).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from disentangled.errors import UsageError, UserError
from empirical.runs.rundir import RunDir

_HELD: dict[tuple[int, str], HeldLock] = {}  # by (PID, resolved path): a forked child locks anew
_WARNED: list[bool] = []  # the no-flock warning, once per process


class WriterLockError(UserError):
    """The directory is being written by another process: one line naming it."""


@dataclass
class HeldLock:
    """A writer lock of this process (created: the directories it made, the deepest first)."""

    directory: Path
    created: list[Path]
    fd: int | None = None
    count: int = 0

    def carry_into(self, directory: str | os.PathLike) -> None:
        """Link the locked file into `directory` (to be renamed onto ours: import_run)."""
        os.link(self.directory / RunDir.WRITER_LOCK, Path(directory) / RunDir.WRITER_LOCK)


@contextlib.contextmanager
def writer_lock(target: str | os.PathLike | RunDir, what: str | None = None) -> Iterator[HeldLock]:
    """Hold the writer lock of the directory `target` (a path, RunDir or SweepDir; created if
    missing) for the body. `what` names it in errors (the flag that gave it, e.g. --run-dir)."""
    directory = Path(getattr(target, "path", target))
    key = (os.getpid(), os.path.realpath(directory))
    held = _HELD[key] = _HELD.get(key) or _take(directory, what)
    held.count += 1
    try:
        yield held
    finally:
        held.count -= 1
        if held.count == 0:
            del _HELD[key]
            _release(held)


@contextlib.contextmanager
def writer_locks(
    targets: Iterable[str | os.PathLike | RunDir], what: str | None = None, skip_busy: bool = False
) -> Iterator[dict[Path, str]]:
    """The writer locks of several directories, all taken before the body. One held elsewhere:
    a WriterLockError (none held); with `skip_busy` it is left out: yields {directory: why}."""
    busy: dict[Path, str] = {}
    with contextlib.ExitStack() as stack:
        for target in targets:
            try:
                stack.enter_context(writer_lock(target, what))
            except WriterLockError as exc:
                if not skip_busy:
                    raise
                busy[Path(getattr(target, "path", target))] = str(exc)
        yield busy


def _take(directory: Path, what: str | None) -> HeldLock:
    named = f"{what} {directory}" if what else str(directory)
    for part in [directory, *directory.parents]:
        if part.exists() and not part.is_dir():
            where = "is a file" if part == directory else f"lies under {part}, which is a file"
            raise UsageError(f"{named}: {where}; give a directory path")
    held = HeldLock(directory, [p for p in [directory, *directory.parents] if not p.exists()])
    path = directory / RunDir.WRITER_LOCK
    try:
        while held.fd is None:  # until the file locked is the one at the path (a holder that
            directory.mkdir(parents=True, exist_ok=True)  # lets go removes its file)
            held.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # never truncates a holder's
            fcntl.flock(held.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(held.fd), os.stat(path)):
                    break
            os.close(held.fd)
            held.fd = None
        argv = [Path(a).name if i == 0 else a for i, a in enumerate(sys.orig_argv)]
        now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": shlex.join(argv)}
        os.ftruncate(held.fd, os.pwrite(held.fd, json.dumps({**me, "started": now}).encode(), 0))
        return held
    except BlockingIOError:
        busy = _busy(directory, os.pread(held.fd, 65536, 0))
        _release(held, unlink=False)
        raise WriterLockError(busy) from None
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS) and held.fd is not None:
            if not _WARNED:
                why = f"({exc.strerror}): written without its writer lock"
                print(f"warning: flock does not work on the file system of {directory} {why}",
                      file=sys.stderr)  # fmt: skip
                _WARNED.append(True)
            return held
        _release(held)
        why = f"cannot write there ({exc.strerror or exc}); choose another location"
        raise UsageError(f"{named}: {why}") from None


def _release(held: HeldLock, unlink: bool = True) -> None:
    """Close the lock file (removed first where `unlink` and ours); rmdir what the lock made."""
    lock = held.directory / RunDir.WRITER_LOCK
    if held.fd is not None:
        with contextlib.suppress(OSError):
            if unlink and os.path.samestat(os.fstat(held.fd), os.stat(lock)):
                os.unlink(lock)
        os.close(held.fd)
        held.fd = None
    for path in held.created:
        with contextlib.suppress(OSError):
            path.rmdir()


def _busy(directory: Path, data: bytes) -> str:
    """The refusal, naming the holder that its lock file names (unless that process is gone)."""
    who = "another process (which has not yet written who it is)"
    with contextlib.suppress(ValueError, LookupError, TypeError, OverflowError, ProcessLookupError):
        info = json.loads(data)
        if info["host"] == socket.gethostname():
            with contextlib.suppress(PermissionError):  # another user's process runs
                os.kill(info["pid"], 0)  # ProcessLookupError: a killed holder's file
        cmd, started = str(info["command"]), str(info["started"]).replace("T", " ")[:19]
        cmd = cmd if len(cmd) <= 160 else cmd[:157] + "..."
        who = f"PID {info['pid']} on host {info['host']} ({cmd}, started {started})"
    return f"{directory} is being written by {who}; wait for it to end or stop it"
