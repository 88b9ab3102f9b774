"""The commands the chain family adds to `python -m empirical` (Chain.commands): one module
each, with `run(argv)` and `main(argv)`; and what `analyze` runs on a chain run."""

__all__ = ["analyze", "attention", "compare_qk", "patching"]
