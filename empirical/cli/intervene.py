"""`python -m empirical intervene RUN_DIR --checkpoint C [...]`: continuations of a run from a
training checkpoint shortly before a jump under each condition (CONDITION_NAMES), with
several data orders, trained as one batch of members: the share that jumps and when, and the
cosine between replicates' W_QK updates. Writes OUT/interventions.json, updates.npz,
survival.png, summary.md and g1_direction.pt (default OUT: RUN_DIR/interventions).
See docs/attribution.md.
"""

from __future__ import annotations

import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import (
    UsageError,
    add_format_argument,
    main_of,
    positive_ints,
    prepare_output_dir,
)
from empirical.runs.rundir import RunDir

CONDITION_NAMES = ("none", "freeze_layer2_qk", "freeze_layer1_embed", "project_g1")


def build_parser():
    ap = parser("intervene", "Continuations from a checkpoint under interventions, replicated.")
    ap.add_argument("run_dir", help="the run (its config and evaluation sets)")
    ap.add_argument("--checkpoint", required=True, help="a training checkpoint of the run")
    ap.add_argument("--steps", type=int, default=2000, help="steps per continuation (2000)")
    ap.add_argument("--replicates", type=int, default=20, help="data orders per condition (20)")
    ap.add_argument(
        "--conditions", default=",".join(CONDITION_NAMES),
        help=f"comma-separated, of {', '.join(CONDITION_NAMES)} (default: all)",
    )  # fmt: skip
    ap.add_argument("--eval-every", type=int, default=50, help="steps between evaluations (50)")
    ap.add_argument("--eval-size", type=int, default=1000, help="sequences per set (1000)")
    ap.add_argument("--threshold", type=float, default=0.9, help="the jump's accuracy (0.9)")
    ap.add_argument("--jump-set", default="1var/ind", help="the set whose rise is the jump")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    ap.add_argument("--out", help="output directory (default RUN_DIR/interventions)")
    ap.add_argument("--label", default="", help="a device label for summary.md")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--quiet", action="store_true", help="no progress, no summary print")
    add_format_argument(ap)
    return ap


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    run_dir = RunDir(args.run_dir).require_run()
    cfg = run_dir.read_two_layer_config("intervene")
    positive_ints(args, "steps", "replicates", "eval_every", "eval_size")
    if not 0 < args.threshold <= 1:
        raise UsageError(f"--threshold {args.threshold}: must be in (0, 1]")
    conditions = [c for c in args.conditions.split(",") if c]
    if not conditions or not set(conditions) <= set(CONDITION_NAMES):
        raise UsageError(f"--conditions {args.conditions!r}: allowed {', '.join(CONDITION_NAMES)}")
    if cfg.model.n_heads != 1 and "project_g1" in conditions:
        raise UsageError("project_g1 needs a one-head model")
    out = prepare_output_dir(args.out or run_dir.path / "interventions")
    from empirical.bridge.interventions.run_interventions import InterventionOptions, intervene

    opts = InterventionOptions(
        checkpoint=args.checkpoint, steps=args.steps, replicates=args.replicates,
        conditions=tuple(conditions), eval_every=args.eval_every, eval_size=args.eval_size,
        threshold=args.threshold, jump_set=args.jump_set, device=args.device,
        threads=args.threads, label=args.label, fmt=args.format, progress=not args.quiet,
    )  # fmt: skip
    text = intervene(run_dir, cfg, out, opts)
    if not args.quiet:
        print(text)
        print(f"wrote {out}")
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
