"""Command-line entry points of `python -m empirical`, one module per command."""

# one module per command (`python -m empirical COMMAND`: empirical.__main__.COMMANDS), each
# with `main(argv) -> exit status` and `run(argv)`; `from empirical.cli import *` imports them
__all__ = [
    "analyze",
    "chain_attention",
    "chain_compare_qk",
    "chain_patching",
    "claims",
    "compare_qk",
    "curves",
    "evaluate",
    "grid",
    "import_checkpoints",
    "ladder",
    "ladder_dynamics",
    "repair",
    "reproduce",
    "sample",
    "sweep",
    "train",
    "unlock",
]
