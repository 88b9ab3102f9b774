"""The one forward changes no bit: training steps (1 and 3 members, depths 2, 3 and 4 with tied
middle layers) and the hooked forward give the weights, losses, logits and activations that
tests/golden/forward_bits.json recorded before the forwards were merged (tests/forward_bits.py
says how), compared as hashes of the exact bytes (torch.equal, not a tolerance).

The fingerprints are those of the CPU kinds recorded (CPU name, torch's CPU capability, torch
version: training is bit-deterministic on one kind, not across them): elsewhere the test is
skipped, saying which kind this is."""

from __future__ import annotations

import json

import pytest
from forward_bits import CASES, GOLDEN, cpu_kind, fingerprints, golden_kind

GOLD = json.loads(GOLDEN.read_text())
KIND = cpu_kind()
ENTRY = golden_kind(GOLD, KIND)


@pytest.mark.skipif(
    ENTRY is None,
    reason=f"fingerprints recorded for {[list(k.values())[:3] for k in GOLD['kinds']]}; this is "
    f"{list(KIND.values())} (python tests/forward_bits.py prints its own)",
)
@pytest.mark.parametrize("case", sorted(CASES))
def test_training_and_hooked_forward_are_bit_identical(case):
    got = fingerprints(case, GOLD["steps"])
    want = ENTRY["cases"][case]
    assert got == want, f"{case}: {[k for k in want if got[k] != want[k]]} changed " + (
        f"(golden from {ENTRY['commit']}; if on purpose: python tests/forward_bits.py --write)"
    )


def test_a_kind_is_matched_by_capability_before_an_unrecorded_one():
    golden = {"kinds": [
        {"cpu": "X", "torch": "t", "capability": None, "cases": "loose"},
        {"cpu": "X", "torch": "t", "capability": "AVX2", "cases": "avx2"},
    ]}  # fmt: skip
    def kind(cpu, capability):
        return {"cpu": cpu, "capability": capability, "torch": "t"}
    assert golden_kind(golden, kind("X", "AVX2"))["cases"] == "avx2"
    assert golden_kind(golden, kind("X", "AVX512"))["cases"] == "loose"
    assert golden_kind(golden, kind("Y", "AVX2")) is None
