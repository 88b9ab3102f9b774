"""`python -m empirical reproduce [--config FILE] [key=value ...]`: the whole paper, one command."""

from __future__ import annotations

import sys
from pathlib import Path

from empirical.cli.common import command_main, parser, prepare_output_dir
from empirical.cli.train import DEFAULT_CONFIG


def run(argv: list[str]) -> int:
    ap = parser("reproduce", "theory tests + report, training, analysis, QK comparison, report.md")
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. train.steps=2000")
    ap.add_argument("--config", help=f"TOML config (default: {DEFAULT_CONFIG.name})")
    ap.add_argument("--runs-root", default="runs", help="writes RUNS_ROOT/NAME/report.md")
    ap.add_argument("--skip-theory", action="store_true", help="skip pytest theory and the report")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from empirical.reproduce import reproduce
    from empirical.run_config import load_run_config

    config = args.config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_run_config(config, args.overrides)
    prepare_output_dir(Path(args.runs_root) / cfg.name, flag="--runs-root")
    path = reproduce(cfg, Path(args.runs_root), args.skip_theory, not args.no_progress)
    print(path.read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    return command_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
