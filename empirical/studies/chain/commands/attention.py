"""`python -m empirical chain-attention RUN_DIR [--set chain/1var_h2] [--over-training]`: a
chain run's attention per layer on the construction's targets (docs/chain.md). Writes
RUN_DIR/analysis/chain_attention_SET.json and .png (SET with `/` as `_`; with
--over-training also chain_attention_SET_steps.json and .png) and prints the table.
"""

from __future__ import annotations

import json
import sys

from empirical.config.command_line import UsageError, main_of, parser
from empirical.report.figures import use_cli_backend


def chain_run_arguments(ap) -> None:
    """The arguments every chain command shares: the run, the set, how many, which step."""
    ap.add_argument("run_dir", help="a run directory of the chain family (task.family = chain)")
    ap.add_argument("--set", default="chain/1var_h2", help="evaluation set (default %(default)s)")
    ap.add_argument("--n", type=int, default=500, help="sequences of the set (default %(default)s)")
    ap.add_argument("--step", type=int, help="a snapshot step (default: the latest weights)")


def open_chain_run(args, command: str):
    """(RunDir, evaluation sets, model, vocabulary) of `args` (chain_run_arguments), each bad
    value a UsageError naming it."""
    if args.n < 1:
        raise UsageError(f"--n {args.n}: give a number of sequences >= 1")
    from empirical.runs.rundir import RunDir

    run_dir = RunDir(args.run_dir).require_run()
    family = run_dir.read_config().task.family
    if family != "chain":
        raise UsageError(f"{run_dir}: task.family = {family!r}; {command} reads chain runs")
    from empirical.runs.load import load_run  # torch: after the checks
    from empirical.task.eval_sets import load_eval_sets
    sets = load_eval_sets(run_dir.eval_sets)
    if args.set not in sets:
        raise UsageError(f"--set {args.set!r}: the run's sets are {', '.join(sets)}")
    model, vocab = load_run(run_dir.path, step=args.step)
    return run_dir, sets, model, vocab


def run(argv: list[str]) -> int:
    ap = parser("chain-attention", "Attention onto the chain construction's targets, per layer.")
    chain_run_arguments(ap)
    ap.add_argument("--over-training", action="store_true", help="also the key measures at "
                    "every snapshot (a figure over steps)")  # fmt: skip
    args = ap.parse_args(argv)
    run_dir, sets, model, vocab = open_chain_run(args, "chain-attention")
    import torch

    from empirical.report.files import atomic_write_bytes
    from empirical.studies.chain.analysis.attention import chain_attention, plot_chain_attention

    with torch.no_grad():
        table = chain_attention(model, vocab, sets[args.set].tokens[: args.n])
    out = run_dir.analysis_dir()
    out.mkdir(parents=True, exist_ok=True)
    stem = f"chain_attention_{args.set.replace('/', '_')}"
    where = f"step {args.step}" if args.step is not None else "latest weights"
    payload = {"set": args.set, "n": min(args.n, len(sets[args.set])), "weights": where,
               "per_layer": table}  # fmt: skip
    atomic_write_bytes(out / f"{stem}.json", json.dumps(payload, indent=2).encode())
    use_cli_backend()
    plot_chain_attention(table, out / f"{stem}.png",
                         f"Attention onto the chain's targets per layer ({run_dir.label()}, "
                         f"{args.set}, {where})")  # fmt: skip
    if args.over_training:
        from empirical.studies.chain.analysis.attention import (
            chain_attention_over_training,
            formation_steps,
            key_series,
            plot_chain_attention_over_training,
        )

        history = chain_attention_over_training(run_dir.path, sets[args.set].tokens[: args.n])
        series = key_series(history)
        formed = formation_steps(history["steps"], series)
        steps = {"set": args.set, "steps": history["steps"], "key_series": series,
                 "formed_at_half_rise": formed, "tables": history["tables"]}  # fmt: skip
        atomic_write_bytes(out / f"{stem}_steps.json", json.dumps(steps, indent=2).encode())
        plot_chain_attention_over_training(
            history, out / f"{stem}_steps.png",
            f"The chain's attention over training ({run_dir.label()}, {args.set})",
        )  # fmt: skip
        print("over training: the first snapshot at half of each measure's rise to its peak")
        for name, f in formed.items():
            at = "never rises" if f["step"] is None else f"step {f['step']}"
            peak = "" if f["peak"] is None else f" (peak {f['peak']:.3f} at {f['peak_step']})"
            print(f"  {name:44s} {at}{peak}")
    for name, values in table.items():
        cells = " ".join("   -  " if v is None else f"{v:6.3f}" for v in values)
        print(f"{name:32s} {cells}")
    print(f"wrote {out / stem}.json and .png", file=sys.stderr)
    return 0


main = main_of(run)


if __name__ == "__main__":
    sys.exit(main())
