"""Trivial rules on the evaluation sets: what a model scores that resolves a variable operand
without binding it to its own assignment, the floor a claim of compositional generalization
must beat.

    python -m empirical trivial-rules --config configs/authors.toml [--seed 0]
        [--sets 1var/var 2var/var curated/novel_orderings]

For every sequence of a set, each rule gives every variable operand a value, the numbers stay
as they are, and the rule's answer is their sum mod p; a rule's accuracy is the share of
sequences where that answer is the label:

- `last`: the value of the last assignment in the context (recency, what a previous-token
  head alone would read),
- `first`: the value of the first assignment,
- `any` (expected): a uniformly drawn assignment per variable operand (the chance of reading a
  wrong binding), computed exactly over all draws,
- `resolved`: the operand's own assignment, the label's rule (100% by construction: it checks
  the parsing).

A family whose vocabulary is not the assign-and-add one (`VARIABLE NUMBER` assignments and a
two-operand query; the chain family's pointers are followed) is refused; the evaluation sets
are built as training builds them (`build_eval_sets`, the config's seed).
"""

from __future__ import annotations

from itertools import product

from empirical.config.io import ConfigError
from empirical.task.batch import Batch
from empirical.task.eval_sets import build_eval_sets
from empirical.task.registry import family_of
from empirical.task.vocab import Vocabulary

RULES = ("last", "first", "any", "resolved")


def _right(operands, chosen: list[int], label: int, p: int) -> bool:
    """Whether the operands, each variable taking the next value of `chosen` (one value: every
    variable takes it), sum to the label mod p."""
    picks = iter(chosen * 2 if len(chosen) == 1 else chosen)
    return sum(next(picks) if t >= p else t for t in operands) % p == label


def rule_accuracies(batch: Batch, vocab) -> dict[str, float]:
    """{rule: accuracy} over the rows of `batch` (module docstring); `vocab` the family's
    Vocabulary (its `_parse_ids` and `_resolve`)."""
    p = vocab.p
    hits = dict.fromkeys(RULES, 0.0)
    rows = batch.tokens.cpu().tolist()
    labels = batch.labels.cpu().tolist()
    for seq, label in zip(rows, labels, strict=True):
        assigns, a, b = vocab._parse_ids(seq)
        bindings = {v: n for v, n, _ in assigns}
        values = [vocab._resolve(n, bindings, pos) for _, n, pos in assigns]
        operands = (a, b)
        hits["last"] += _right(operands, values[-1:], label, p)
        hits["first"] += _right(operands, values[:1], label, p)
        own = [vocab._resolve(t, bindings, 0) for t in operands if t >= p]
        hits["resolved"] += _right(operands, own, label, p)
        # `any`: every variable operand draws one of the assignments, uniformly and independently
        options = [values if t >= p else [t] for t in operands]
        draws = [sum(c) % p == label for c in product(*options)]
        hits["any"] += sum(draws) / len(draws)
    n = max(len(rows), 1)
    return {rule: hits[rule] / n for rule in RULES}


def rules_table(task, seed: int, sets: list[str] | None = None) -> dict[str, dict[str, float]]:
    """{set: {rule: accuracy}} on the evaluation sets of `task` and `seed` (all, or `sets`)."""
    vocab = family_of(task).vocabulary(task)
    if not isinstance(vocab, Vocabulary):
        raise ConfigError(f"task.family = {task.family!r}: its sequences are not VARIABLE "
                          "NUMBER assignments and a two-operand query, which the rules read")
    built = build_eval_sets(task, seed)
    names = list(built) if not sets else sets
    unknown = [s for s in names if s not in built]
    if unknown:
        raise ConfigError(f"--sets {unknown} are not evaluation sets of this task; "
                         f"allowed: {', '.join(built)}")  # fmt: skip
    return {name: rule_accuracies(built[name], vocab) for name in names}


def markdown(table: dict[str, dict[str, float]]) -> str:
    lines = ["| set | " + " | ".join(RULES) + " |", "| --- |" + " --- |" * len(RULES)]
    for name, acc in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{100 * acc[r]:.1f}%" for r in RULES) + " |")
    return "\n".join(lines)
