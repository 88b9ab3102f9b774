"""What the command lines of `python -m disentangled`, `-m theory` and `-m empirical` share:
the entry point that keeps the error contract (disentangled.errors: a UserError is one line
`error: ...` and exit status 2, never a traceback), a parser whose errors are UsageErrors, and
checks of output locations.

    parser = OneLineParser(prog="python -m empirical train")   # bad arguments: UsageError
    sys.exit(run_main(main, argv, prog="python -m empirical"))

Output locations are checked before any computation (`prepare_output_dir`,
`check_output_file`): a path that is a file or lies under a file, or a directory that cannot
be written, is a UsageError naming the flag. A command that writes figures calls
`use_cli_backend()` when it runs (importing a module never selects a matplotlib backend).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import EXIT_INTERRUPTED, EXIT_USER_ERROR, UsageError, UserError


def use_cli_backend() -> None:
    """Select the non-interactive Agg backend for a command-line run (figures go to files),
    unless the user chose one with MPLBACKEND. Called by the CLI entry points when they run,
    never on import. Before matplotlib is imported this only sets MPLBACKEND=Agg (importing
    matplotlib takes most of a second: a bad argument is answered without it)."""
    if os.environ.get("MPLBACKEND"):
        return
    if "matplotlib" not in sys.modules:
        os.environ["MPLBACKEND"] = "Agg"  # read by matplotlib when it is imported
        return
    import matplotlib

    matplotlib.use("Agg")


class OneLineParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are a `UsageError` (one line, no usage dump);
    `--help` still prints the help and exits 0. Subparsers made from it are of its class.

    An unrecognized `--flag` gets a hint on the same line: what `field_hint(name)` returns
    for it (a caller's lookup, e.g. the dotted config field `train.steps` for `--steps`),
    given in override form with the flag's value (`train.steps=100`), else a close flag of
    this parser (`did you mean --seeds?`)."""

    def __init__(self, *args, field_hint: Callable[[str], str | None] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.field_hint = field_hint
        self._argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # noqa: D401 - argparse's hook
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            hint = self._flag_hint(message[len(prefix) :].split())
            if hint:
                message = f"{message} ({hint})"
        raise UsageError(message)

    def _flag_hint(self, unknown: list[str]) -> str | None:
        """`did you mean ...?` for the first unrecognized `--flag` with a close match."""
        import difflib

        flags = [s for s in self._option_string_actions if s.startswith("--")]
        for token in unknown:
            if not token.startswith("--") or token == "--":
                continue
            flag, eq, value = token.partition("=")
            field = self.field_hint(flag[2:]) if self.field_hint else None
            if field:
                if not eq:  # the flag's value: the argument after it on the command line
                    i = self._argv.index(token) if token in self._argv else -1
                    following = self._argv[i + 1] if 0 <= i < len(self._argv) - 1 else ""
                    value = following if following and not following.startswith("-") else ""
                return f"did you mean the config override {field}={value or 'VALUE'}?"
            close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.75)
            if close:
                return f"did you mean {close[0]}?"
        return None

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", type(self))
        return super().add_subparsers(**kwargs)


def os_error_message(exc: OSError) -> str:
    """One line for a file-system fault: the path, what went wrong, and what to do."""
    where = exc.filename if exc.filename is not None else "(no path)"
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    what = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "free some space and run the command again (files written before are intact)",
        errno.EDQUOT: "free some space and run the command again",
        errno.EACCES: "check the permissions of that path or choose another output location",
        errno.EPERM: "check the permissions of that path or choose another output location",
        errno.EROFS: "the file system is read-only; choose another output location",
        errno.ENOTDIR: "a part of that path is a file, not a directory; choose another path",
        errno.EISDIR: "that path is a directory; give a file path",
        errno.ENOENT: "check the path",
    }.get(exc.errno)
    return f"{where}: {what}" + (f" ({hint})" if hint else "")


def _blocking_file(path: Path) -> Path | None:
    """The first existing non-directory at `path` or above it (None: the path can be a dir)."""
    for part in [path, *path.parents]:
        if part.exists() and not part.is_dir():
            return part
    return None


def check_writable_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """An existing directory in which files can be created, else a UsageError naming `flag`.

    Tried for real (a probe file created and removed): permissions, ACLs, a read-only mount
    and the superuser are all answered by the file system itself."""
    path = Path(path)
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check-", suffix=".tmp")
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc}); choose another location"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return path


def check_output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Check, before any computation and without creating anything, that `path` can be an
    output directory: not a file, not under a file, and writable (if it exists) or creatable
    (its nearest existing parent writable). A UsageError naming the flag otherwise."""
    path = Path(path)
    blocker = _blocking_file(path)
    if blocker is not None:
        where = "is a file" if blocker == path else f"lies under {blocker}, which is a file"
        raise UsageError(f"{flag} {path}: {where}; give a directory path")
    if path.is_dir():
        return check_writable_dir(path, flag)
    nearest = path.parent
    while not nearest.is_dir() and nearest != nearest.parent:
        nearest = nearest.parent
    check_writable_dir(nearest, f"{flag} {path}: its parent")
    return path


def prepare_output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Check, before any computation, that `path` can be an output directory, and create it.

    Refused with a UsageError naming the flag and the path: a path that is a file or lies
    under a file, or a directory that cannot be created or written."""
    path = Path(path)
    blocker = _blocking_file(path)
    if blocker is not None:
        where = "is a file" if blocker == path else f"lies under {blocker}, which is a file"
        raise UsageError(f"{flag} {path}: {where}; give a directory path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot create it ({exc.strerror or exc}); choose another location"
        ) from None
    return check_writable_dir(path, flag)


def check_output_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Check, before any computation, that a file can be written at `path` (its directory is
    created if missing): not a directory, not under a file, in a writable directory, and not
    an existing file that cannot be replaced."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file path")
    blocker = _blocking_file(path.parent)
    if blocker is not None:
        raise UsageError(f"{flag} {path}: lies under {blocker}, which is a file; give another path")
    prepare_output_dir(path.parent, flag=f"{flag} {path}: its directory")
    if path.exists() and not path.is_file():
        raise UsageError(f"{flag} {path}: not a regular file; give a file path")
    return path


def run_main(main: Callable[[list[str]], int | None], argv: list[str] | None = None) -> int:
    """Run a command's `main(argv)` under the error contract: UserError -> `error: ...`,
    exit 2; a file-system fault (OSError) -> `error: PATH: what (what to do)`, exit 2;
    Ctrl-C -> exit 130. Anything else is a bug and keeps its traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return int(main(argv) or 0)
    except SystemExit as exc:  # --help, or a command that exits itself
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USER_ERROR)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # e.g. piped into `head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        print(f"error: {os_error_message(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def parse_mix(text: str) -> dict[str, float]:
    """The --mix option: `1var=1,2var=1` -> {kind: weight}; a bad one is a UsageError."""
    mix = {}
    for part in text.split(","):
        kind, _, weight = part.partition("=")
        kind = kind.strip()
        if kind not in ("0var", "1var", "2var"):
            raise UsageError(f"--mix={text}: kinds are 0var, 1var, 2var (e.g. '1var=1,2var=1')")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise UsageError(f"--mix={text}: weight {weight!r} is not a number") from None
        if not math.isfinite(w) or w < 0:
            raise UsageError(f"--mix={text}: weights must be finite and >= 0")
        mix[kind] = w
    if sum(mix.values()) <= 0:
        raise UsageError(f"--mix={text}: weights must have a positive sum")
    return mix


def write_output(out: Path | None, name: str, text: str) -> None:
    """Write `text` to out/name (the --out folder, made if needed); nothing without --out."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
