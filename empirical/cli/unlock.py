"""`python -m empirical unlock DIR [--force]`: remove the lock file a killed writer left (its
flock ended with it); a lock a process holds is refused with one line naming that process.
`--force` is kept for old scripts and changes nothing. Its options:
empirical.runs.options.UnlockOptions. See docs/robustness.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.config.options import command_main
from empirical.runs.lock import WriterLockError, writer_lock
from empirical.runs.options import UnlockOptions
from empirical.runs.rundir import RunDir


def run(opts: UnlockOptions) -> int:
    directory = Path(opts.directory)
    lock_file = directory / RunDir.WRITER_LOCK
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


main = command_main(UnlockOptions, run)

if __name__ == "__main__":
    sys.exit(main())
