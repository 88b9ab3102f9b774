"""Files written so that a crash, a kill or a full disk never leaves half of one: every
output of `empirical` (configs, checkpoints, JSON, markdown, figures, logs) goes through here.

    atomic_write_bytes(path, data)     # the old file or the new one, never a torn one
    append_text(path, line)            # a log line appended whole, or not at all
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc), else
    by the set-and-restore idiom."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one, with
    the permissions a plain `open(path, "wb")` would give (0o666 minus the umask), not
    mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())
        except OSError:  # a file system without permissions (some network mounts)
            pass
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # e.g. ENOSPC from write/fsync
            raise _with_path(exc, path) from exc
        raise


def _with_path(exc: OSError, path: str | os.PathLike) -> OSError:
    """The same fault, naming the file it happened to (for the one-line error)."""
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append `text` to `path` (created if missing) and fsync it. A failed write (a full
    disk, ...) is undone: the file is cut back to its previous length, so no torn line is
    left behind, and the error names the file."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            if isinstance(exc, OSError) and exc.filename is None:
                raise _with_path(exc, path) from exc
            raise
    finally:
        os.close(fd)
