"""`python -m empirical unlock DIR [--force]`: remove the lock file a killed writer left (its
flock ended with it); a lock a process holds is refused with one line naming that process.
`--force` is kept for old scripts and changes nothing. See docs/robustness.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from empirical.cli.parsing import parser
from empirical.config.command_line import UsageError, main_of


def build_parser() -> argparse.ArgumentParser:
    ap = parser("unlock", "Remove the lock file a killed writer left in a directory.")
    ap.add_argument("directory", help="a run, sweep or grid directory")
    ap.add_argument("--force", action="store_true", help="no effect (kept for old scripts)")
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from empirical.runs.lock import WriterLockError, writer_lock
    from empirical.runs.rundir import RunDir

    directory = Path(args.directory)
    lock_file = directory / RunDir.WRITER_LOCK
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    if not lock_file.exists():
        print(f"{directory}: not locked (no {RunDir.WRITER_LOCK}): nothing to remove")
        return 0
    try:
        with writer_lock(directory):  # taken and let go at once, which removes the file
            pass
    except WriterLockError as exc:
        raise WriterLockError(f"{exc} (its lock ends with it: nothing to remove)") from None
    print(f"removed {lock_file}, left by a writer that no longer runs")
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
