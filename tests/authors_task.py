"""The paper authors' task, stated once for the tests (../shared/authors/README.md), and where
their train_pairs.json lies (empirical.config.paths; absent: tests skip)."""

from __future__ import annotations

from empirical.config.paths import authors_dir

AUTHORS_PAIRS_FILE = authors_dir() / "train_pairs.json"

AUTHORS = dict(
    p=59,
    K=12,
    max_assignments=6,
    r1=("k", "l"),
    r2=("a", "b"),
    allow_same_variable_operands=False,
    held_out_form="ordered",
    held_out_fraction=0.3,
    pair_split="python_random",
    pair_seed=42,
    mix="rows",
    assignment_count="clamped",
    padding="gaps",
)
