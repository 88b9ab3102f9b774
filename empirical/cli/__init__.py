"""Command-line entry points of `python -m empirical`, one module per command."""
