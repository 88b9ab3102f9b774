"""empirical.report.stats: accuracy intervals against known values and at the edges."""

from __future__ import annotations

import numpy as np
import pytest

from empirical.report.stats import (
    accuracy_interval,
    accuracy_intervals,
    correct_count,
    format_accuracy,
    wilson_band,
)


def test_known_values_50_of_100():
    # Wilson: 0.5 +- 1.96 * sqrt(0.25/100 + 1.96^2/40000) / (1 + 1.96^2/100)
    low, high = accuracy_interval(50, 100)
    assert low == pytest.approx(0.403832, abs=1e-6) and high == pytest.approx(0.596168, abs=1e-6)
    low, high = accuracy_interval(50, 100, method="exact")  # Clopper-Pearson
    assert low == pytest.approx(0.398321, abs=1e-6) and high == pytest.approx(0.601679, abs=1e-6)
    low99, high99 = accuracy_interval(50, 100, confidence=0.99)
    assert low99 < 0.403832 and high99 > 0.596168


def test_edges_zero_and_all_correct():
    assert accuracy_interval(0, 10) == (0.0, pytest.approx(0.277533, abs=1e-6))
    low, high = accuracy_interval(10, 10)
    assert low == pytest.approx(0.722467, abs=1e-6) and high == 1.0
    assert accuracy_interval(0, 10, method="exact") == (0.0, pytest.approx(0.308497, abs=1e-6))
    low, high = accuracy_interval(10, 10, method="exact")
    assert low == pytest.approx(1 - 0.308497, abs=1e-6) and high == 1.0
    assert accuracy_interval(1, 1)[1] == 1.0 and accuracy_interval(0, 1)[0] == 0.0


def test_bigger_sets_give_narrower_intervals():
    widths = [np.subtract(*accuracy_interval(n // 2, n)[::-1]) for n in (10, 100, 1000, 10000)]
    assert all(a > b for a, b in zip(widths, widths[1:], strict=False))
    assert widths[-1] == pytest.approx(2 * 1.96 * 0.005, rel=1e-3)


@pytest.mark.parametrize(
    "correct, n, kwargs",
    [(1, 0, {}), (-1, 10, {}), (11, 10, {}), (2.5, 10, {}), (5, 10, {"confidence": 1.0})]
    + [(5, 10, {"method": "wald"}), (True, 10, {})],
)
def test_bad_arguments(correct, n, kwargs):
    with pytest.raises(ValueError):
        accuracy_interval(correct, n, **kwargs)


def test_dict_helper_uses_the_set_sizes():
    acc = {"0var/ind": 0.972, "1var/ind": 1.0, "2var/ind": 0.5}
    out = accuracy_intervals(acc, {"0var/ind": 500, "1var/ind": 200})
    assert set(out) == {"0var/ind", "1var/ind"}  # no size: no interval
    first = out["0var/ind"]
    assert first["n"] == 500 and first["correct"] == 486 and first["acc"] == 0.972
    assert first["ci95"] == [pytest.approx(x, abs=1e-6) for x in accuracy_interval(486, 500)]
    assert out["1var/ind"]["ci95"][1] == 1.0
    assert "ci99" in accuracy_intervals(acc, {"2var/ind": 10}, confidence=0.99)["2var/ind"]
    assert correct_count(0.333333, 3) == 1 and correct_count(1.0, 7) == 7
    with pytest.raises(ValueError):
        correct_count(1.5, 10)


def test_wilson_band_matches_the_scalar_interval():
    n = 300
    acc = np.array([0, 1, 17, 150, 299, 300]) / n
    low, high = wilson_band(acc, n)
    for a, lo, hi in zip(acc, low, high, strict=True):
        expected = accuracy_interval(round(a * n), n)
        assert lo == pytest.approx(expected[0], abs=1e-9) and hi == pytest.approx(expected[1])
    assert low[0] == 0.0 and high[-1] == 1.0


def test_format_accuracy():
    assert format_accuracy(0.972, (0.9536, 0.9832)) == "97.2% [95.4, 98.3]"
    assert format_accuracy(0.5) == "50.0%" and format_accuracy(None) == "-"
