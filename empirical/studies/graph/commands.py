"""`python -m empirical graph-ladder --config configs/graph_ladder.toml [--seeds 0 1 2]`: the
seed's ablation ladder on the graph family (docs/graph.md, "The ladder"). Trains each rung for
each seed (empirical.studies.graph.ladder), scores every final model, writes OUT/ladder.json,
ladder.md, accuracy_by_size.png and accuracy_by_depth.png, and prints the table. Options:
empirical.studies.graph.options.GraphLadderOptions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from disentangled.errors import UserError
from empirical.config.options import command_argv, command_main
from empirical.model.device import cpu_model
from empirical.report.figures import use_cli_backend
from empirical.report.writer import print_report, say, write_report
from empirical.runs.rundir import RunDir
from empirical.studies.graph.ladder import (
    depth_rows,
    kind_rows,
    ladder_rows,
    node_rule_rows,
    rule_rows,
    run_dir_of,
    run_scores,
    rung_config,
    train_rung,
)
from empirical.studies.graph.options import GraphLadderOptions
from empirical.studies.graph.report import ladder_report
from empirical.task.pairs import training_generator
from empirical.task.sampler import run_training_sampler


def trained_depth(task, seed: int = 0, n: int = 4000) -> int:
    """The deepest node among n training rows (the trained range of depths)."""
    batch = run_training_sampler(task, seed).sample(n, training_generator(seed))
    return int(batch.target_depths.max())


def ladder(opts: GraphLadderOptions) -> dict:
    """Train (unless --no-train) and score every rung and seed; the result the report reads.
    A run that is not finished is left out of the table (the table says k of N seeds)."""
    base = opts.run_config()
    if not opts.train and not any(RunDir(run_dir_of(opts.out, rung, seed)).summary.is_file()
                                  for seed in opts.seeds for rung in opts.variant_names()):
        raise UserError(
            f"--out {opts.out}: no finished run of these rungs and seeds under "
            f"{Path(opts.out) / 'runs'}; train them (graph-ladder without --no-train) or name "
            "the ladder's directory"
        )  # fmt: skip
    scores: dict[str, dict[int, dict]] = {}
    for seed in opts.seeds:  # seed by seed: a ladder stopped early is whole for its seeds
        for rung in opts.variant_names():
            cfg = rung_config(base, rung, seed)
            run_dir = run_dir_of(opts.out, rung, seed)
            if opts.train:
                how = train_rung(cfg, run_dir, progress=opts.progress)
                say(f"{rung} seed {seed}: {how} ({run_dir})")
            if RunDir(run_dir).summary.is_file():
                scores.setdefault(rung, {})[seed] = run_scores(run_dir)
            else:
                say(f"{rung} seed {seed}: not finished, left out")
    scores = {rung: scores[rung] for rung in opts.variant_names() if rung in scores}
    return {
        "config": opts.config_path() and str(opts.config_path()),
        "command": "python -m empirical graph-ladder " + " ".join(command_argv(opts) or ()),
        "device": cpu_model() if base.train.device == "cpu" else base.train.device,
        "seeds": list(opts.seeds),
        "rungs": [r for r in opts.variant_names() if r in scores],
        "trained_nodes": [base.task.graph_min_nodes, base.task.graph_max_nodes],
        "trained_depth": trained_depth(base.task),
        "rows": ladder_rows(scores),
        "node_rule_rows": node_rule_rows(scores),
        "depth_rows": depth_rows(scores),
        "graph_depth_rows": depth_rows(scores, "by_graph_depth"),
        "kind_rows": kind_rows(scores),
        "one_step_kind_rows": kind_rows(scores, "one_step_by_kind"),
        "operand_value_rows": kind_rows(scores, "by_operand_values"),
        "one_step_operand_value_rows": kind_rows(scores, "one_step_by_operand_values"),
        "gap_rows": depth_rows(scores, "by_copy_gap", "gap"),
        "gap_rule_rows": rule_rows(scores),
    }


def run(opts: GraphLadderOptions) -> int:
    torch.set_num_threads(max(1, opts.run_config().train.threads))
    result = ladder(opts)
    use_cli_backend()
    report = ladder_report(result)
    paths = write_report(report, opts.out, figures=opts.figures)
    print_report(report, paths, quiet=False)
    return 0


main = command_main(GraphLadderOptions, run)

if __name__ == "__main__":
    sys.exit(main())
