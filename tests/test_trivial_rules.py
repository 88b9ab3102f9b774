"""The trivial rules of empirical.analysis.trivial_rules: exact on hand-made sequences, the
label's own rule at 100% on built evaluation sets (the parsing), and a clear error for a set
or family it does not read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from empirical.__main__ import main
from empirical.analysis.trivial_rules import rule_accuracies, rules_table
from empirical.runs.config import load_run_config
from empirical.task.batch import Batch
from empirical.task.vocab import Vocabulary

ROOT = Path(__file__).resolve().parents[1]


def _batch(vocab: Vocabulary, texts: list[str]) -> Batch:
    tokens = torch.stack([vocab.encode(t) for t in texts])
    labels = torch.tensor([vocab.label(row) for row in tokens])
    zeros = torch.zeros(len(texts), 2, dtype=torch.long)
    return Batch(tokens, labels, torch.zeros(len(texts), dtype=torch.long), zeros, zeros, zeros)


def test_rules_on_hand_made_sequences():
    vocab = Vocabulary(p=11, K=4, L=16)
    # the queried variable is the last assignment in the first row, the first in the second
    batch = _batch(vocab, ["a=1,b=5,b+3=?", "a=2,b=7,a+4=?"])
    acc = rule_accuracies(batch, vocab)
    assert acc["last"] == 0.5 and acc["first"] == 0.5 and acc["resolved"] == 1.0
    assert acc["any"] == pytest.approx(0.5)  # each row: one of its two assignments is right
    # two variables: `any` is the share of the 3 x 3 draws that give the label (1+5 and 5+1)
    acc2 = rule_accuracies(_batch(vocab, ["a=1,b=5,c=2,a+b=?"]), vocab)
    assert acc2["any"] == pytest.approx(2 / 9) and acc2["last"] == 0.0


def test_the_labels_rule_is_exact_on_built_sets():
    cfg = load_run_config(ROOT / "configs" / "smoke.toml", ["task.eval_size=60"])
    table = rules_table(cfg.task, cfg.seed)
    assert table and all(row["resolved"] == 1.0 for row in table.values())
    assert all(0.0 <= v <= 1.0 for row in table.values() for v in row.values())


def test_bad_set_and_family(capsys):
    assert main(["trivial-rules", "--config", str(ROOT / "configs" / "smoke.toml"),
                 "--sets", "9var/x"]) == 2  # fmt: skip
    assert "9var/x" in capsys.readouterr().err
    assert main(["trivial-rules", "--config", str(ROOT / "configs" / "graph.toml")]) == 2
    assert "task.family = 'graph'" in capsys.readouterr().err
