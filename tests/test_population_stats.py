"""The statistics of empirical.experiments.population: known values, worked by hand or by
formula here (not by the code under test)."""

from __future__ import annotations

import math
import warnings

import pytest

from empirical.experiments.population.claims import count, verdict
from empirical.report.population_stats import (
    fisher_exact,
    kaplan_meier,
    logrank,
    mann_whitney,
    multi_bootstrap,
    share_interval,
)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval by its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize("k,n", [(0, 4), (2, 4), (4, 4), (5, 8), (8, 8), (29, 32), (1, 1)])
def test_share_interval_is_wilson(k, n):
    assert share_interval(k, n) == pytest.approx(wilson(k, n), abs=1e-9)
    assert share_interval(0, 0) is None


def test_share_interval_of_two_in_four():
    lo, hi = share_interval(2, 4)
    assert lo == pytest.approx(0.150036, abs=1e-5) and hi == pytest.approx(0.849964, abs=1e-5)


@pytest.mark.parametrize(
    "k,n,expected",
    [
        (4, 4, "holds"),  # Wilson [0.51, 1]
        (8, 8, "holds"),
        (29, 32, "holds"),  # 0.906, interval above 1/2
        (3, 3, "too few members"),  # 1.0 but Wilson [0.44, 1]
        (0, 3, "too few members"),
        (0, 4, "fails"),
        (1, 16, "fails"),  # 0.0625, upper bound 0.28
        (7, 8, "seed-dependent"),  # 0.875 < 0.9
        (28, 32, "seed-dependent"),
        (5, 8, "seed-dependent"),
        (1, 1, "one draw"),
        (0, 1, "one draw"),
        (0, 0, "not measured"),
    ],
)
def test_verdict_rule(k, n, expected):
    assert verdict(k, n) == expected


def test_count_leaves_out_members_that_do_not_measure_a_claim():
    got = count(["yes", "no", None, "no (timing)", "-", "yes"])
    assert (got["holds"], got["of"], got["share"]) == (2, 4, 0.5)
    assert got["ci95"] == pytest.approx(list(wilson(2, 4)), abs=1e-9)
    assert got["verdict"] == "seed-dependent"


def test_kaplan_meier_with_censoring_by_hand():
    # events at 10, 20, 30; censored at 25 and 40: S = 4/5, x 3/4, (25: none), x 1/2
    s = kaplan_meier([10, 20, None, 30, None], [40, 40, 25, 40, 40])
    assert s.steps == [10, 20, 25, 30, 40]
    assert s.survival == pytest.approx([0.8, 0.6, 0.6, 0.3, 0.3])
    assert (s.n, s.events, s.censored) == (5, 3, [25, 40])
    assert s.at(5) == 1.0 and s.at(20) == pytest.approx(0.6) and s.at(35) == pytest.approx(0.3)
    assert s.median() == 30


def test_kaplan_meier_without_events_stays_at_one():
    s = kaplan_meier([None, None], [800, 800])
    assert s.survival == [] and s.at(10_000) == 1.0 and s.median() is None
    assert s.to_dict()["censored"] == [800, 800]


def test_logrank_same_and_different_populations():
    same = logrank([100, 200, 300], [900] * 3, [100, 200, 300], [900] * 3)
    assert same["pvalue"] == pytest.approx(1.0) and same["events"] == [3, 3]
    # 'their init learns 8/8 early, ours 5/8 late': clearly different
    a = [2000 + 100 * i for i in range(8)]
    b = [5000, 5100, 5200, 5300, 5400, None, None, None]
    diff = logrank(a, [40000] * 8, b, [40000] * 8)
    assert diff["pvalue"] < 1e-3 and diff["events"] == [8, 5] and diff["n"] == [8, 8]
    assert logrank([None], [10], [None], [10])["pvalue"] is None  # nothing to compare


def test_logrank_of_identical_steps_is_no_difference_without_a_warning():
    # every member of both populations jumps at the same evaluation: the statistic's variance
    # is zero (0/0 in scipy); nothing tells the populations apart, so p = 1, not None or nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = logrank([3550] * 8, [4000] * 8, [3550] * 8, [4000] * 8)
    assert same["statistic"] == 0.0 and same["pvalue"] == 1.0 and same["events"] == [8, 8]
    # a shift of one evaluation is not zero variance: a real test
    assert logrank([3550] * 8, [4000] * 8, [3600] * 8, [4000] * 8)["pvalue"] < 1e-3


def test_logrank_two_by_two_by_hand():
    # A: events at 1, 2; B: events at 3, 4. Log-rank: at t=1: O_A=1, E_A=2/4, V=(2*2*1*3)/(16*3)
    # = 0.25; t=2: n=(1,2), E_A=1/3, V=(1*2*1*2)/(9*2)=2/9; t=3,4: A has no one at risk.
    o_minus_e = (1 - 0.5) + (1 - 1 / 3)
    var = 0.25 + 2 / 9
    z = o_minus_e / math.sqrt(var)
    from scipy.stats import norm

    expected = 2 * norm.sf(abs(z))
    got = logrank([1, 2], [9, 9], [3, 4], [9, 9])
    assert got["pvalue"] == pytest.approx(expected, rel=1e-6)


def test_fisher_exact_of_eight_in_eight_against_five_in_eight():
    # margins 8, 8 and 13, 3: P(A = a) = C(13, a) C(3, 8 - a) / C(16, 8), a = 5..8:
    # 1287, 5148, 5148, 1287 of 12870; two-sided: the tables as unlikely as A = 8, i.e. 8 and 5
    assert fisher_exact(8, 8, 5, 8) == pytest.approx(0.2)
    assert fisher_exact(3, 3, 0, 0) is None


def test_mann_whitney_by_hand():
    # every a below every b: U = 0, the exact two-sided p = 2 / C(6, 3) = 0.1
    got = mann_whitney([0.1, 0.2, None, 0.3], [0.4, 0.5, 0.6])
    assert got["n"] == [3, 3] and got["statistic"] == 0
    assert got["pvalue"] == pytest.approx(0.1)
    assert mann_whitney([], [0.5])["pvalue"] is None


def test_multi_bootstrap_members_only():
    # two members, 0 and 1: a resample's mean is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4
    got = multi_bootstrap([0.0, 1.0])
    assert got["mean"] == 0.5 and got["ci95"] == [0.0, 1.0] and got["n"] == 2
    assert got["resampled"] == "members"
    flat = multi_bootstrap([3.0, 3.0, 3.0, None])
    assert flat["ci95"] == [3.0, 3.0] and flat["n"] == 3
    assert multi_bootstrap([None, float("nan")]) is None


def test_multi_bootstrap_resamples_evaluation_sequences():
    # one member at 50% on 10 000 sequences: the binomial interval, 0.5 +- 1.96 * 0.005
    got = multi_bootstrap([0.5], sizes=[10_000])
    assert got["resampled"] == "members and evaluation sequences"
    lo, hi = got["ci95"]
    assert lo == pytest.approx(0.5 - 1.96 * 0.005, abs=0.001)
    assert hi == pytest.approx(0.5 + 1.96 * 0.005, abs=0.001)
    # perfect accuracy cannot vary; a fixed seed gives the same interval twice
    assert multi_bootstrap([1.0, 1.0], sizes=[100, 100])["ci95"] == [1.0, 1.0]
    again = multi_bootstrap([0.9, 0.7, 0.8], sizes=[1000] * 3)
    assert again == multi_bootstrap([0.9, 0.7, 0.8], sizes=[1000] * 3)
    # 100 sequences per member (sd 0.04 each) add spread to the members' own (sd 0.03)
    values = [0.80 + 0.01 * i for i in range(10)]
    both = multi_bootstrap(values, sizes=[100] * 10)["ci95"]
    members = multi_bootstrap(values)["ci95"]
    assert both[1] - both[0] > 1.3 * (members[1] - members[0])


def test_multi_bootstrap_refuses_accuracies_outside_zero_one():
    with pytest.raises(ValueError, match="accuracies"):
        multi_bootstrap([1.5], sizes=[10])
