"""`python -m empirical reproduce [--config FILE] [key=value ...]`: the whole paper, one command."""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.cli.parsing import parser
from empirical.cli.train import DEFAULT_CONFIG
from empirical.config.command_line import UsageError, main_of, prepare_output_dir


def run(argv: list[str]) -> int:
    ap = parser("reproduce", "theory tests + report, the paper's own run (imported), our "
                "training, analysis, QK comparison, report.md")  # fmt: skip
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. train.steps=2000")
    ap.add_argument("--config", help=f"TOML config (default: {DEFAULT_CONFIG.name})")
    ap.add_argument("--runs-root", default="runs", help="writes RUNS_ROOT/NAME/report.md")
    ap.add_argument("--skip-theory", action="store_true", help="skip pytest theory and the report")
    ap.add_argument(
        "--authors", default=None,
        help="the paper authors' checkpoints folder (checkpoint_step_N.pth files; default "
        "../shared/authors/checkpoints beside the repository when present; $AUTHORS_DIR or "
        "$ASSIGN_ADD_SHARED point elsewhere)",
    )  # fmt: skip
    ap.add_argument("--no-authors", action="store_true", help="skip the paper's own run")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from empirical.config.paths import authors_checkpoints
    from empirical.experiments.reproduce import reproduce
    from empirical.runs.config import load_run_config

    config = args.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_run_config(config, args.overrides)
    prepare_output_dir(Path(args.runs_root) / cfg.name, flag="--runs-root")
    if args.no_authors:
        authors = None
    elif args.authors is not None:
        authors = Path(args.authors)
        if not authors.is_dir():
            raise UsageError(f"--authors {authors}: not a folder of checkpoint_step_N.pth files")
    else:
        authors = authors_checkpoints()  # skipped with a note where it is absent
    path = reproduce(cfg, Path(args.runs_root), args.skip_theory, not args.no_progress, authors)
    print(path.read_text())
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
