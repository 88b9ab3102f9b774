"""The one forward changes no bit: training steps (1 and 3 members, depths 2, 3 and 4 with tied
middle layers) and the hooked forward give the weights, losses, logits and activations that
tests/golden/forward_bits.json recorded before the forwards were merged (tests/forward_bits.py
says how), compared as hashes of the exact bytes (torch.equal, not a tolerance).

The fingerprints are those of one CPU kind and torch version (training is bit-deterministic
there, not across them): elsewhere the test is skipped, saying which it has."""

from __future__ import annotations

import json

import pytest
import torch
from forward_bits import CASES, GOLDEN, fingerprints

from empirical.train.summary import cpu_model

GOLD = json.loads(GOLDEN.read_text())


@pytest.mark.skipif(
    (GOLD["cpu"], GOLD["torch"]) != (cpu_model(), torch.__version__),
    reason=f"fingerprints of {GOLD['cpu']} with torch {GOLD['torch']}; this is {cpu_model()} "
    f"with torch {torch.__version__} (python tests/forward_bits.py prints its own)",
)
@pytest.mark.parametrize("case", sorted(CASES))
def test_training_and_hooked_forward_are_bit_identical(case):
    got = fingerprints(case, GOLD["steps"])
    want = GOLD["cases"][case]
    assert got == want, f"{case}: {[k for k in want if got[k] != want[k]]} changed " + (
        f"(golden from {GOLD['commit']}; if on purpose: python tests/forward_bits.py --write)"
    )
