"""`python -m empirical COMMAND ...`: one entry point, each command in its own module.

The dispatcher is the one place that imports late: a command's options class (torch-free) reads
and checks the arguments first, and only then is the command's module (and torch) imported and
its `run(options)` called, so that `--help` and a bad argument are answered at once.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

from disentangled.command_line import run_main
from disentangled.errors import UsageError
from empirical.config.options import parse_options
from empirical.studies.registry import COMMANDS as FAMILY_COMMANDS


class Command(NamedTuple):
    """A command: its module, its one-line help, and its options class ("module:Class",
    torch-free); the module's `run(options)` raises a UserError for what the user can fix."""

    module: str
    help: str
    options: str


# command -> (module, one-line help, options class)
COMMANDS: dict[str, Command] = {
    "sample": ("empirical.cli.sample", "print sequences of a split or evaluation set as text",
               "empirical.runs.options:SampleOptions"),
    "train": ("empirical.cli.train", "train the model (configs/authors.toml by default)",
              "empirical.train.options:TrainOptions"),
    "evaluate": ("empirical.cli.evaluate", "accuracy of every evaluation set at any step of a run",
                 "empirical.train.options:EvaluateOptions"),
    "import-checkpoints": ("empirical.cli.import_checkpoints",
                           "turn the paper authors' checkpoints into a run directory",
                           "empirical.runs.options:ImportOptions"),
    "curves": ("empirical.cli.curves", "several runs' accuracy curves side by side",
               "empirical.cli.curves_options:CurvesOptions"),
    "analyze": ("empirical.cli.analyze", "mechanistic analysis of a run's checkpoints",
                "empirical.studies.options:AnalyzeOptions"),
    "codes": ("empirical.cli.codes", "multi-head attention's latent codes at `=`: the form "
              "probe on held-out compositions", "empirical.analysis.codes.options:CodesOptions"),
    "compare-qk": ("empirical.cli.compare_qk", "theory's predicted vs observed layer-2 QK update",
                   "empirical.bridge.compare_qk.options:CompareQKOptions"),
    "attribute": ("empirical.cli.attribute",
                  "split a window's loss and score changes into the parameter groups' parts",
                  "empirical.bridge.attribution.options:AttributeOptions"),
    "intervene": (
        "empirical.cli.intervene",
        "continuations from a checkpoint with pieces frozen or G1 projected out, replicated",
        "empirical.bridge.interventions.options:InterveneOptions",
    ),
    "pool-interventions": (
        "empirical.cli.pool_interventions",
        "the interventions of several checkpoints (seeds) side by side and pooled",
        "empirical.bridge.interventions.options:PoolInterventionsOptions",
    ),
    # the commands the task families add (empirical.studies.registry: chain-attention, ...)
    **FAMILY_COMMANDS,
    "ladder": ("empirical.cli.ladder", "assumption ladder from Theorem C.1's model to a snapshot",
               "empirical.bridge.ladder.options:LadderCommandOptions"),
    "ladder-dynamics": ("empirical.cli.ladder_dynamics",
                        "train Theorem C.1's model with its constraints released one at a time",
                        "empirical.bridge.ladder_dynamics.options:LadderDynamicsOptions"),
    "race": ("empirical.cli.race",
             "the race criterion (docs/race.md): step-0 prediction vs the ladder's outcome",
             "empirical.bridge.race.options:RaceOptions"),
    "sweep": ("empirical.cli.sweep", "Figure 3 sweeps with batched multi-model training",
              "empirical.experiments.sweep.options:SweepOptions"),
    "grid": ("empirical.cli.grid", "named config variants x seeds, trained as batched models",
             "empirical.experiments.sweep.options:GridOptions"),
    "claims": ("empirical.cli.claims",
               "a population of runs (seeds) of one config: how often each paper claim holds",
               "empirical.experiments.population.options:ClaimsOptions"),
    "at-step": ("empirical.cli.at_step",
                "each run as the run of S steps it was: a stopped population at a common step",
                "empirical.experiments.population.options:AtStepOptions"),
    "trivial-rules": ("empirical.cli.trivial_rules",
                      "what rules that ignore a variable's own binding score on each set",
                      "empirical.runs.options:TrivialRulesOptions"),
    "recount": ("empirical.cli.recount",
                "published claims.json files in the present form (ranks, leans, split spikes)",
                "empirical.experiments.population.options:RecountOptions"),
    "reproduce": ("empirical.cli.reproduce", "the whole paper, one command",
                  "empirical.experiments.reproduce_options:ReproduceOptions"),
    "repair": ("empirical.cli.repair", "repair a run directory's metrics log or evaluation sets",
               "empirical.train.options:RepairOptions"),
    "unlock": ("empirical.cli.unlock", "remove the writer lock a killed writer left behind",
               "empirical.runs.options:UnlockOptions"),
}  # fmt: skip
COMMANDS = {name: Command(*entry) for name, entry in COMMANDS.items()}

# the commands whose process keeps freed memory (empirical.train.allocator): those whose work
# benchmarks/bench_allocator.py shows it speeds up (a training step, one model or batched;
# compare-qk); reproduce does both, and sets it in its background processes too
KEEP_FREED_MEMORY = frozenset({"train", "sweep", "grid", "compare-qk", "reproduce"})


def usage() -> str:
    lines = ["usage: python -m empirical COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<18} {command.help}" for name, command in COMMANDS.items()]
    lines.append("\n`python -m empirical COMMAND --help` for a command's options.")
    return "\n".join(lines)


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        raise UsageError(f"unknown command {name!r}; allowed: {', '.join(COMMANDS)}")
    command = COMMANDS[name]
    importlib.import_module("empirical.report.figures").use_cli_backend()  # Agg: figures to files
    if name in KEEP_FREED_MEMORY:
        # fewer page faults
        importlib.import_module("empirical.train.allocator").retain_freed_memory()
    options = parse_options(options_class(command), rest)  # every check, before torch
    return int(importlib.import_module(command.module).run(options) or 0)


def options_class(command: Command) -> type:
    """The options class of a command (imported: torch-free)."""
    module, _, name = command.options.partition(":")
    return getattr(importlib.import_module(module), name)


# every command under one error contract: a UserError (bad value, missing file, run directory
# in use, ...) or a file-system fault prints one `error: ...` line and exits 2
def main(argv: list[str] | None = None) -> int:
    """`python -m empirical ARGV` as a function (exit status), for Python and tests."""
    return run_main(_dispatch, argv)


if __name__ == "__main__":
    sys.exit(main())
