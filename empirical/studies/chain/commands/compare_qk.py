"""`python -m empirical chain-compare-qk RUN_DIR`: compare-qk for a chain run (>= 3 layers)
against the two-hop theory, and the order in which the hops form (docs/compare_qk.md,
"Deeper models (chain runs)"). Writes chain_compare_qk.json, summary.md and
chain_compare_qk.png to RUN_DIR/analysis/chain_compare_qk (or --out) and prints the summary
(or, with --format json, the JSON).
"""

from __future__ import annotations

import json
import sys

from empirical.bridge.compare_qk.options import FRAMES
from empirical.config.command_line import UsageError, main_of, parser, prepare_output_dir


def run(argv: list[str]) -> int:
    ap = parser("chain-compare-qk", "The two-hop theory's QK updates vs a chain run's snapshots.")
    ap.add_argument("run_dir", help="a chain-family run directory with snapshots, >= 3 layers")
    ap.add_argument("--out", help="output directory (default RUN_DIR/analysis/chain_compare_qk)")
    ap.add_argument("--format", choices=("table", "json"), default="table",
                    help="what to print: the markdown summary (default) or the JSON")  # fmt: skip
    ap.add_argument("--sets", default="chain/1var_h1,chain/1var_h2",
                    help="evaluation sets the theory and the gradients are evaluated on, equal "
                    "weights (default %(default)s)")  # fmt: skip
    ap.add_argument("--attention-set", default="chain/1var_h2", help="set whose chains the "
                    "formation measures follow (default %(default)s)")  # fmt: skip
    ap.add_argument("--n", type=int, default=400, help="sequences per set (default %(default)s)")
    ap.add_argument("--frame", choices=FRAMES, default="dual", help="how updates are read "
                    "(docs/compare_qk.md; default dual, exact)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.n < 1:
        raise UsageError(f"--n {args.n}: give a number of sequences >= 1")
    sets = tuple(s.strip() for s in args.sets.split(",") if s.strip())
    if not sets:
        raise UsageError("--sets: give at least one evaluation set")
    from empirical.runs.rundir import RunDir

    run_dir = RunDir(args.run_dir).require_run()
    cfg = run_dir.read_config()
    if cfg.task.family != "chain":
        raise UsageError(f"{run_dir}: task.family = {cfg.task.family!r}; chain-compare-qk reads "
                         "chain runs")  # fmt: skip
    if cfg.model.n_layers < 3:
        raise UsageError(f"{run_dir}: model.n_layers = {cfg.model.n_layers}; the two-hop "
                         "comparison needs >= 3 layers (a middle and a last hop)")  # fmt: skip
    steps = run_dir.snapshot_steps()
    if len(steps) < 2:
        raise UsageError(f"{run_dir}: {len(steps)} snapshot(s); the comparison needs >= 2 "
                         "(train with train.snapshot_every > 0)")  # fmt: skip
    from empirical.task.eval_sets import load_eval_sets

    have = load_eval_sets(run_dir.eval_sets)
    missing = [s for s in (*sets, args.attention_set) if s not in have]
    if missing:
        raise UsageError(f"set {','.join(missing)}: the run's sets are {', '.join(have)}")
    out = prepare_output_dir(args.out or run_dir.analysis_dir() / "chain_compare_qk")

    from empirical.report.figures import use_cli_backend
    from empirical.report.files import atomic_write_bytes
    from empirical.studies.chain.analysis.qk_compare import ChainCompareConfig, compare_chain_run
    from empirical.studies.chain.analysis.qk_summary import plot_chain_compare, summary_markdown

    res = compare_chain_run(
        run_dir.path,
        ChainCompareConfig(sets=sets, attention_set=args.attention_set, n=args.n, frame=args.frame),
    )
    text = json.dumps(res, indent=2, default=float)
    atomic_write_bytes(out / "chain_compare_qk.json", text.encode())
    md = summary_markdown(res)
    atomic_write_bytes(out / "summary.md", md.encode())
    use_cli_backend()
    plot_chain_compare(res, out / "chain_compare_qk.png")
    print(text if args.format == "json" else md)
    print(f"wrote {out}/chain_compare_qk.json, summary.md, chain_compare_qk.png", file=sys.stderr)
    return 0


main = main_of(run)


if __name__ == "__main__":
    sys.exit(main())
