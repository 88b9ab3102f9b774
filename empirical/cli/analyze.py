"""`python -m empirical analyze RUN_DIR [--step S] [--out DIR] [...]`: mechanistic analysis.

Examples:
    python -m empirical analyze runs/paper/seed0             # final checkpoint + all snapshots
    python -m empirical analyze runs/paper/seed0 --step 5000 # the snapshot at step 5000
    python -m empirical analyze runs/paper/seed0 --no-dynamics  # skip the snapshots

Writes analysis.json, summary.md and PNG figures to RUN_DIR/analysis (with --step:
RUN_DIR/analysis/step_XXXXXX) and prints summary.md. See docs/analysis.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m empirical analyze",
        description="Mechanistic analysis of a training run (paper Sections 5-6, Appendix B).",
    )
    ap.add_argument("run_dir", help="a run directory written by `python -m empirical train`")
    ap.add_argument("--step", type=int, help="analyse snapshots/step_S.pt (default: final)")
    ap.add_argument("--out", help="output directory (default RUN_DIR/analysis[/step_S])")
    ap.add_argument(
        "--no-dynamics", action="store_true", help="skip the progress measures over snapshots"
    )
    ap.add_argument("--every", type=int, default=1, help="use every N-th snapshot (default 1)")
    ap.add_argument(
        "--probe-size", type=int, default=2048, help="probe sequences per split (default 2048)"
    )
    ap.add_argument("--seed", type=int, help="analysis seed (default: the run's seed)")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: fastest here)"
    )
    ap.add_argument("--no-figures", action="store_true", help="numbers only")
    ap.add_argument("--quiet", action="store_true", help="do not print the summary")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from empirical.analysis.report import analyze_run
    from empirical.config_io import ConfigError
    from empirical.model import CheckpointError

    if args.every < 1:
        print("error: --every must be >= 1", file=sys.stderr)
        return 2
    if args.probe_size < 16:
        print("error: --probe-size must be >= 16", file=sys.stderr)
        return 2
    try:
        result = analyze_run(
            args.run_dir,
            step=args.step,
            out_dir=args.out,
            dynamics=not args.no_dynamics,
            every=args.every,
            n_probe=args.probe_size,
            seed=args.seed,
            threads=args.threads,
            progress=not args.no_progress,
            figures=not args.no_figures,
        )
    except (FileNotFoundError, ConfigError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else None
    if out is None:
        base = Path(args.run_dir) / "analysis"
        out = base if args.step is None else base / f"step_{args.step:06d}"
    if not args.quiet:
        print((out / "summary.md").read_text())
    print(
        f"wrote {out}/analysis.json, summary.md and {len(result.get('figures', []))} figures "
        f"in {result['seconds']:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
