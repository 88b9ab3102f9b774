"""`python -m empirical evaluate RUN_DIR [--step N] [--format json|table] [--all-steps]`.

Prints the accuracy of every evaluation set of the run (eval_sets.pt), as JSON {"step": N,
"accuracy": {...}, "loss": {...}, "n": {...}} or a table. --all-steps evaluates every snapshot
and writes the run's metrics log, summary and Figure 2 (a run with its own training log only
with --force). Its options: empirical.train.options.EvaluateOptions. See docs/import.md.
"""

from __future__ import annotations

import json
import sys

import torch

from empirical.config.options import command_main
from empirical.report.writer import say
from empirical.runs.rundir import RunDir
from empirical.train.evaluate_run import evaluate_all_steps, evaluate_run, format_table
from empirical.train.options import EvaluateOptions


def run(opts: EvaluateOptions) -> int:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    if opts.all_steps:
        run_dir = RunDir(opts.run_dir)
        records, summary = evaluate_all_steps(
            run_dir, batch_size=opts.batch_size, device=opts.device, force=opts.force,
            progress=opts.progress,
        )  # fmt: skip
        final = records[-1]
        result = {"step": final["step"], "accuracy": final["acc"], "loss": final["loss"],
                  "n": summary.get("eval_set_sizes") or {}}  # fmt: skip
        say(f"evaluated {len(records)} snapshots in {summary['evaluation_s']:.1f} s; wrote "
            f"{run_dir.metrics}, {run_dir.summary}, {run_dir.training_curves}")
        say(f"phases: {_phases_line(summary['phases'])}")
    else:
        result = evaluate_run(
            opts.run_dir, step=opts.step, batch_size=opts.batch_size, device=opts.device
        )
    print(format_table(result) if opts.format == "table" else json.dumps(result, indent=2))
    return 0


def _phases_line(ph: dict) -> str:
    def span(rise):
        if not rise:
            return "none"
        jump = rise.get("jump_start_step")
        tail = "" if jump is None else f", jump {jump}->{rise['jump_end_step']}"
        return f"{rise['start_step']}-{rise['end_step']}{tail}"

    return (
        f"0-var >= 90% at {ph.get('zero_var_learned_step')}; first spike "
        f"{span(ph.get('first_spike'))}; second spike {span(ph.get('second_spike'))}"
    )


main = command_main(EvaluateOptions, run)

if __name__ == "__main__":
    sys.exit(main())
