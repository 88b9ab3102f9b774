"""`python -m empirical unlock DIR [--force]`: remove the writer lock a killed writer left.

Examples:
    python -m empirical unlock runs/smoke/seed0      # a run directory
    python -m empirical unlock runs/sweep/smoke      # a sweep directory (or a member's)

Only the O_EXCL lock file (writer.lock.excl) of a file system without working flock, or of
EMPIRICAL_LOCK=excl, can outlive its process; a flock lock ends with its process and never
needs this. Removed only when its process no longer runs (same host, PID gone); refused
while it runs. `--force` also removes one whose process cannot be checked from here (another
host, or a file that does not say who): only when you know that no process writes there.
See empirical/run_lock.py and docs/robustness.md.
"""

from __future__ import annotations

import argparse
import sys

from empirical.cli.common import command_main, parser


def build_parser() -> argparse.ArgumentParser:
    ap = parser("unlock", "Remove the stale writer lock a killed writer left in a directory.")
    ap.add_argument("directory", help="a run, sweep or grid directory")
    ap.add_argument(
        "--force",
        action="store_true",
        help="also remove a lock whose process cannot be checked from here (another host)",
    )
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from empirical.run_lock import remove_stale_lock

    print(remove_stale_lock(args.directory, force=args.force))
    return 0


def main(argv: list[str] | None = None) -> int:
    return command_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
