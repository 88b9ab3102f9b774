"""`python -m empirical chain-attention RUN_DIR [--set chain/1var_h2] [--over-training]`: a
chain run's attention per layer on the construction's targets (docs/chain.md). Writes
RUN_DIR/analysis/chain_attention_SET.json and .png (SET with `/` as `_`; with
--over-training also chain_attention_SET_steps.json and .png) and prints the table. Its
options: empirical.studies.chain.options.
"""

from __future__ import annotations

import sys

import torch

from disentangled.command_line import UsageError
from empirical.config.options import command_main
from empirical.report.figures import use_cli_backend
from empirical.report.writer import write_report
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir
from empirical.studies.chain.analysis.attention import (
    chain_attention,
    chain_attention_over_training,
    formation_steps,
    key_series,
    report,
)
from empirical.studies.chain.options import ChainAttentionOptions, ChainRunOptions
from empirical.task.eval_sets import load_eval_sets


def open_chain_run(opts: ChainRunOptions):
    """(RunDir, evaluation sets, model, vocabulary) of a chain command's options (checked to
    be a chain run); --set a UsageError unless the run has it."""
    run_dir = RunDir(opts.run_dir)
    sets = load_eval_sets(run_dir.eval_sets)
    if opts.set not in sets:
        raise UsageError(f"--set {opts.set!r}: the run's sets are {', '.join(sets)}")
    model, vocab = load_run(run_dir.path, step=opts.step)
    return run_dir, sets, model, vocab


def weights_of(opts: ChainRunOptions) -> str:
    """Which weights were read, as the outputs say it."""
    return f"step {opts.step}" if opts.step is not None else "latest weights"


def run(opts: ChainAttentionOptions) -> int:
    run_dir, sets, model, vocab = open_chain_run(opts)
    tokens = sets[opts.set].tokens[: opts.n]
    with torch.no_grad():
        table = chain_attention(model, vocab, tokens)
    history = chain_attention_over_training(run_dir.path, tokens) if opts.over_training else None
    use_cli_backend()
    result = report(opts.set, min(opts.n, len(sets[opts.set])), weights_of(opts), table,
                    run_dir.label(), history)  # fmt: skip
    paths = write_report(result, run_dir.analysis_dir())
    if history is not None:
        formed = formation_steps(history["steps"], key_series(history))
        print("over training: the first snapshot at half of each measure's rise to its peak")
        for name, f in formed.items():
            at = "never rises" if f["step"] is None else f"step {f['step']}"
            peak = "" if f["peak"] is None else f" (peak {f['peak']:.3f} at {f['peak_step']})"
            print(f"  {name:44s} {at}{peak}")
    for name, values in table.items():
        cells = " ".join("   -  " if v is None else f"{v:6.3f}" for v in values)
        print(f"{name:32s} {cells}")
    stem = next(iter(paths.values())).with_suffix("")  # RUN_DIR/analysis/chain_..._SET
    print(f"wrote {stem}.json and .png", file=sys.stderr)
    return 0


main = command_main(ChainAttentionOptions, run)


if __name__ == "__main__":
    sys.exit(main())
