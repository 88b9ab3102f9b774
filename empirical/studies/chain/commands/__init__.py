"""The commands the chain family adds to `python -m empirical` (empirical.studies.registry):
one module each, with `run(options)` and `main(argv)`; their options are
empirical.studies.chain.options. What `analyze` runs on a chain run is
empirical.studies.chain.analysis.mechanisms.analyze_chain."""

__all__ = ["attention", "compare_qk", "patching"]
