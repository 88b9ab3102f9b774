"""The writer lock of a run or sweep directory: one process writes a directory at a time.

    with writer_lock("runs/smoke/seed0", "--run-dir"):
        ...                       # every write of the command into the directory

The lock is an OS lock, `fcntl.flock(LOCK_EX | LOCK_NB)` on `writer.lock` in the directory
(`RunDir.WRITER_LOCK`): the OS releases it when its process ends, however it ends, so a
`kill -9` leaves no stale lock. The holder writes who it is into the file (PID, host, command
line, start time, as JSON), so that a second writer is refused with one line naming them:

    error: runs/twice is being written by PID 1234 on host h (python -m empirical train ...,
    started 2026-11-26 20:40:01); wait for it to end or stop it

(a `UserError`: exit status 2). A refused writer writes nothing: it opens the holder's lock
file without truncating it and creates no other file. The holder removes the lock file when
it releases the lock (a killed holder leaves it behind, unlocked and harmless), and removes
the directories the lock itself created if they are still empty (a command refused after
taking the lock leaves nothing behind).

Re-entrant within a process: a process that holds the lock of a directory (the command line
took it, then a library function it calls takes it again) just nests; the lock is released
when the outermost holder exits. The registry is keyed by the directory's resolved path.

File systems without a working flock (flock fails with ENOLCK, EOPNOTSUPP or ENOSYS: some
network file systems), or `EMPIRICAL_LOCK=excl` in the environment: the lock is the file
`writer.lock.excl` (`RunDir.WRITER_LOCK_EXCL`), created with O_CREAT | O_EXCL and holding the
same JSON, removed on release. A process killed with `kill -9` leaves it behind; the next
writer is then refused with the holder's PID and the way to clear it (`python -m empirical
unlock DIR`, which removes it only when its process no longer runs, or deleting the file). A
one-time warning on stderr says when flock does not work on a file system.

Readers (analyze, compare-qk, curves, evaluate without --all-steps, load_run) never take the
lock: every file a writer replaces is replaced atomically, and a torn last line of
metrics.jsonl is skipped (docs/robustness.md, "One writer per run directory").
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from disentangled.command_line import UsageError, UserError
from empirical.rundir import RunDir

try:
    import fcntl
except ImportError:  # not POSIX: the O_EXCL lock file only
    fcntl = None

MODE_ENV = "EMPIRICAL_LOCK"  # "excl": the O_EXCL lock file even where flock works
NO_FLOCK_ERRNOS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOTSUP})
LOCK_FILE_NAMES = (RunDir.WRITER_LOCK, RunDir.WRITER_LOCK_EXCL)
_COMMAND_SHOWN = 160  # characters of the holder's command line in a refusal
_HOLDER_WAIT_S = 1.0  # how long a refused writer waits for a new holder to say who it is


class WriterLockError(UserError):
    """The directory is being written by another process (or a killed writer's O_EXCL lock
    file is left there): one line naming the holder and what to do."""


@dataclass
class HeldLock:
    """A writer lock this process holds (see the module docstring)."""

    directory: Path
    key: str  # the directory's resolved path (the registry's key)
    mode: str  # "flock" or "excl"
    fds: list[int] = field(default_factory=list)  # flock: the locked open files
    token: str = ""  # excl: what identifies our lock file
    created: Path | None = None  # the topmost directory the lock created
    count: int = 1
    pid: int = field(default_factory=os.getpid)

    @property
    def lock_file(self) -> Path:
        name = RunDir.WRITER_LOCK if self.mode == "flock" else RunDir.WRITER_LOCK_EXCL
        return self.directory / name

    @property
    def created_directory(self) -> bool:
        """Whether the directory did not exist before the lock created it."""
        return self.created is not None

    def carry_into(self, directory: str | os.PathLike) -> None:
        """Put this lock into `directory` too (a new directory about to be renamed onto the
        locked one: empirical.import_run), so the lock stays held after the rename."""
        target = Path(directory)
        if self.mode == "excl":
            _create_excl(target / RunDir.WRITER_LOCK_EXCL, self.token)
            return
        copy = target / RunDir.WRITER_LOCK
        try:
            os.link(self.lock_file, copy)  # the very locked file, under a second name
        except OSError:  # no hard links here: a second file, locked too
            fd = os.open(copy, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_holder(fd, holder_info())
            self.fds.append(fd)


_HELD: dict[str, HeldLock] = {}
_GUARD = threading.RLock()
_WARNED: list[bool] = []  # the no-flock warning, once per process


def directory_of(target: str | os.PathLike | RunDir) -> Path:
    """The directory of a path, a RunDir or a SweepDir."""
    return Path(getattr(target, "path", target))


@contextlib.contextmanager
def writer_lock(target: str | os.PathLike | RunDir, what: str | None = None) -> Iterator[HeldLock]:
    """Hold the writer lock of the directory `target` (a path, RunDir or SweepDir) for the
    body; the directory is created if missing. Another process holding it: a
    WriterLockError. `what` names the directory in the error of one that cannot be created
    or written (the flag that gave it, e.g. "--run-dir")."""
    held = acquire(target, what)
    try:
        yield held
    finally:
        release(held)


@contextlib.contextmanager
def writer_locks(
    targets: Iterable[str | os.PathLike | RunDir], what: str | None = None, skip_busy: bool = False
) -> Iterator[dict[Path, str]]:
    """Hold the writer locks of several directories, all taken before the body runs and
    released after it. One held elsewhere: a WriterLockError (and none is held); with
    `skip_busy`, it is left out instead: yields {directory: why} of those left out."""
    busy: dict[Path, str] = {}
    with contextlib.ExitStack() as stack:
        for target in targets:
            try:
                stack.enter_context(writer_lock(target, what))
            except WriterLockError as exc:
                if not skip_busy:
                    raise
                busy[directory_of(target)] = str(exc)
        yield busy


def acquire(target: str | os.PathLike | RunDir, what: str | None = None) -> HeldLock:
    """Take the writer lock of a directory (or nest in this process's hold of it); pair with
    `release`. Prefer the context manager `writer_lock`."""
    directory = directory_of(target)
    key = os.path.realpath(directory)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None and held.pid == os.getpid():
            held.count += 1
            return held
        held = _take(directory, key, what)
        _HELD[key] = held
        return held


def release(held: HeldLock) -> None:
    """Undo one `acquire`; the last one releases the lock and removes its file."""
    with _GUARD:
        held.count -= 1
        if held.count > 0:
            return
        if _HELD.get(held.key) is held:
            del _HELD[held.key]
        if held.mode == "flock":
            _drop_flock(held)
        else:
            _drop_excl(held)
        _remove_created(held.directory, held.created)


def holds(target: str | os.PathLike | RunDir) -> bool:
    """Whether this process holds the writer lock of the directory."""
    held = _HELD.get(os.path.realpath(directory_of(target)))
    return held is not None and held.pid == os.getpid()


def is_lock_file(path: str | os.PathLike) -> bool:
    """Whether a file of a directory is its writer lock (not content of the directory)."""
    return Path(path).name in LOCK_FILE_NAMES


# -- taking and dropping ------------------------------------------------------------------


def _take(directory: Path, key: str, what: str | None) -> HeldLock:
    _refuse_non_directory(directory, what)
    created = _make_directory(directory, what)
    try:
        held = None
        if not _excl_forced():
            held = _take_flock(directory, key, what)
        if held is None:
            held = _take_excl(directory, key, what)
    except BaseException:
        _remove_created(directory, created)
        raise
    held.created = created
    return held


def _excl_forced() -> bool:
    return fcntl is None or os.environ.get(MODE_ENV, "").strip().lower() == "excl"


def _take_flock(directory: Path, key: str, what: str | None) -> HeldLock | None:
    """The flock lock of the directory (None: flock does not work on this file system)."""
    path = directory / RunDir.WRITER_LOCK
    for _ in range(100):
        try:
            fd, made = _open_lock_file(path)  # never truncates a holder's
        except FileNotFoundError:  # a refused writer removed the directory it had created
            directory.mkdir(parents=True, exist_ok=True)
            continue
        except OSError as exc:
            raise _cannot_write(directory, what, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_holder_fd(fd)
            os.close(fd)
            raise WriterLockError(busy_message(directory, info)) from None
        except OSError as exc:
            os.close(fd)
            if made:
                with contextlib.suppress(OSError):
                    path.unlink()
            if exc.errno in NO_FLOCK_ERRNOS:
                _warn_no_flock(directory, exc)
                return None
            raise
        if _same_file(fd, path):
            held = HeldLock(directory, key, "flock", fds=[fd])
            break
        os.close(fd)  # its last holder removed it meanwhile: lock the file now at the path
    else:
        raise WriterLockError(f"{directory}: could not take its writer lock {path}; try again")
    try:
        _refuse_live_excl(directory)
        _write_holder(fd, holder_info())
    except BaseException:
        _drop_flock(held)
        raise
    return held


def _open_lock_file(path: Path) -> tuple[int, bool]:
    """The lock file opened for reading and writing, created if absent (never truncated);
    and whether this call created it."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        return os.open(path, os.O_RDWR), False


def _take_excl(directory: Path, key: str, what: str | None) -> HeldLock:
    path = directory / RunDir.WRITER_LOCK_EXCL
    token = uuid.uuid4().hex
    try:
        _create_excl(path, token)
    except FileExistsError:
        raise WriterLockError(excl_refusal(directory, read_holder(path))) from None
    except OSError as exc:
        raise _cannot_write(directory, what, exc) from None
    return HeldLock(directory, key, "excl", token=token)


def _create_excl(path: Path, token: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        _write_all(fd, json.dumps({**holder_info(), "token": token}).encode())
        os.fsync(fd)  # it outlives a crash of the machine: say who left it
    finally:
        os.close(fd)


def _drop_flock(held: HeldLock) -> None:
    """Remove the lock file if it is (still) one of ours, then let go of it."""
    mine = set()
    for fd in held.fds:
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            mine.add((st.st_dev, st.st_ino))
    with contextlib.suppress(OSError):
        st = os.stat(held.lock_file)
        if (st.st_dev, st.st_ino) in mine:
            os.unlink(held.lock_file)
    for fd in held.fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    held.fds = []


def _drop_excl(held: HeldLock) -> None:
    info = read_holder(held.lock_file)
    if info is not None and info.get("token") == held.token:
        with contextlib.suppress(OSError):
            os.unlink(held.lock_file)


def _refuse_live_excl(directory: Path) -> None:
    """A flock holder also respects an O_EXCL lock file of a process that may still run
    (one that took the lock with EMPIRICAL_LOCK=excl, or from a machine without flock)."""
    path = directory / RunDir.WRITER_LOCK_EXCL
    if not path.exists():
        return
    info = read_holder(path)
    if info is not None and _holder_gone(info):
        return  # stale: it locks nothing for a flock writer
    raise WriterLockError(excl_refusal(directory, info))


# -- the directory ------------------------------------------------------------------------


def _refuse_non_directory(directory: Path, what: str | None) -> None:
    """A UsageError (nothing created) if the directory is a file or lies under one."""
    for part in [directory, *directory.parents]:
        if part.exists() and not part.is_dir():
            where = "is a file" if part == directory else f"lies under {part}, which is a file"
            raise UsageError(f"{_named(directory, what)}: {where}; give a directory path")


def _make_directory(directory: Path, what: str | None) -> Path | None:
    """Create the directory if missing; returns the topmost directory created (None: it
    existed)."""
    if directory.is_dir():
        return None
    top = directory
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_write(directory, what, exc) from None
    return top


def _remove_created(directory: Path, created: Path | None) -> None:
    """Remove the directories the lock created, from `directory` up to `created`, as long as
    they are empty (a command refused after taking the lock leaves nothing behind)."""
    if created is None:
        return
    path = directory
    while True:
        try:
            path.rmdir()
        except OSError:
            return
        if path == created or path.parent == path:
            return
        path = path.parent


def _cannot_write(directory: Path, what: str | None, exc: OSError) -> UsageError:
    return UsageError(
        f"{_named(directory, what)}: cannot write there ({exc.strerror or exc}); choose "
        "another location"
    )


def _named(directory: Path, what: str | None) -> str:
    return f"{what} {directory}" if what else str(directory)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


def _warn_no_flock(directory: Path, exc: OSError) -> None:
    if _WARNED:
        return
    _WARNED.append(True)
    print(
        f"warning: flock does not work on the file system of {directory} "
        f"({exc.strerror or exc}); its writer lock is the file {RunDir.WRITER_LOCK_EXCL} "
        "instead, which a killed writer leaves behind (`python -m empirical unlock DIR` "
        "removes it then)",
        file=sys.stderr,
    )


# -- who holds it -------------------------------------------------------------------------


def holder_info() -> dict:
    """What a holder writes into its lock file: who it is and since when."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command_line(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def command_line() -> str:
    """This process's command line, as typed (`python -m empirical train ...`)."""
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    if argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def _write_holder(fd: int, info: dict) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    _write_all(fd, json.dumps(info).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _parse_holder(data: bytes) -> dict | None:
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return info if isinstance(info, dict) else None


def _read_holder_fd(fd: int) -> dict | None:
    """The holder's JSON, read through our own open file (None: it does not say). A holder
    that has just taken the lock may not have written it yet (the file is empty, or still
    names a killed earlier holder): waited for a moment."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        info = _parse_holder(os.pread(fd, 65536, 0))
        if info is not None and not _holder_gone(info):
            return info
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def read_holder(path: str | os.PathLike) -> dict | None:
    """The JSON of a lock file (None: absent, empty or unreadable)."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        try:
            info = _parse_holder(Path(path).read_bytes())
        except FileNotFoundError:
            return None
        except OSError:
            info = None
        if info is not None or time.monotonic() > deadline:
            return info
        time.sleep(0.02)


def describe(info: dict) -> str:
    """'PID 1234 on host h (python -m empirical train ..., started 2026-11-26 20:40:01)'."""
    command = str(info.get("command") or "?")
    if len(command) > _COMMAND_SHOWN:
        command = command[: _COMMAND_SHOWN - 3] + "..."
    started = str(info.get("started") or "?").replace("T", " ")[:19]
    pid, host = info.get("pid", "?"), info.get("host", "?")
    return f"PID {pid} on host {host} ({command}, started {started})"


def busy_message(directory: Path, info: dict | None) -> str:
    if info is None:
        who = "another process (which has not yet written who it is)"
    else:
        who = describe(info)
    return f"{directory} is being written by {who}; wait for it to end or stop it"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _holder_gone(info: dict) -> bool:
    """Whether an O_EXCL lock file's process certainly no longer runs (same host, PID gone)."""
    pid = info.get("pid")
    if info.get("host") != socket.gethostname() or isinstance(pid, bool):
        return False
    return isinstance(pid, int) and pid > 0 and not _pid_alive(pid)


def excl_refusal(directory: Path, info: dict | None) -> str:
    """Why an O_EXCL lock file refuses a writer, and how to clear it if it is stale."""
    path = directory / RunDir.WRITER_LOCK_EXCL
    unlock = f"python -m empirical unlock {directory}"
    if info is None:
        return (
            f"{directory} is locked by {path}, which does not say who holds it (a writer "
            "taking it this instant, or one killed while it did); if no process writes the "
            f"directory, remove it: `{unlock} --force` (or delete that file)"
        )
    if _holder_gone(info):
        return (
            f"{directory} is locked by {path}, left by {describe(info)}, which no longer runs; "
            f"remove it with `{unlock}` (or delete that file), then run the command again"
        )
    text = busy_message(directory, info) + f" (lock file {path})"
    if info.get("host") != socket.gethostname():
        text += f"; if it no longer runs there, remove the lock: `{unlock} --force`"
    return text


# -- `python -m empirical unlock` -----------------------------------------------------------


def flock_holder(directory: Path) -> dict | None:
    """The holder of the directory's flock lock, if a live process holds it (None: none;
    nothing is created, the lock is only tried)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(directory / RunDir.WRITER_LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder_fd(fd) or {}
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def remove_stale_lock(target: str | os.PathLike | RunDir, force: bool = False) -> str:
    """Remove the O_EXCL lock file a killed writer left in a directory; refused (a
    WriterLockError) while its process runs, and, unless `force`, when that cannot be told
    (another host, or a file that does not say who). Returns what was done, one line."""
    directory = directory_of(target)
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    path = directory / RunDir.WRITER_LOCK_EXCL
    if not path.exists():
        holder = None if holds(directory) else flock_holder(directory)
        if holder is not None:
            raise WriterLockError(
                busy_message(directory, holder or None) + " (its flock lock ends with it: "
                "there is nothing to remove)"
            )
        return f"{directory}: not locked (no {RunDir.WRITER_LOCK_EXCL}): nothing to remove"
    info = read_holder(path)
    if info is not None and not _holder_gone(info):
        if info.get("host") == socket.gethostname() or not force:  # alive, or cannot tell
            raise WriterLockError(excl_refusal(directory, info))
    if info is None and not force:
        raise WriterLockError(excl_refusal(directory, None))
    path.unlink(missing_ok=True)
    left = f", left by {describe(info)}" if info is not None else ""
    return f"removed {path}{left}"
