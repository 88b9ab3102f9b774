"""Command-line entry points of `python -m empirical`, one module per command."""

# one module per command (`python -m empirical COMMAND`: empirical.__main__.COMMANDS), each
# with `run(options)` (its options class: the dispatcher's table) and `main(argv) -> exit
# status`; `from empirical.cli import *` imports them
# (the commands a task family adds live in its package: empirical/studies/<name>/commands)
__all__ = [
    "analyze",
    "at_step",
    "attribute",
    "claims",
    "codes",
    "compare_qk",
    "curves",
    "evaluate",
    "grid",
    "import_checkpoints",
    "intervene",
    "ladder",
    "ladder_dynamics",
    "pool_interventions",
    "race",
    "recount",
    "repair",
    "reproduce",
    "sample",
    "sweep",
    "train",
    "trivial_rules",
    "unlock",
]
