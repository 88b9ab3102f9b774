"""Phase detection on synthetic metric logs whose phase changes are known, and on the paper
authors' own run (imported from ../shared/authors or $AUTHORS_DIR, skipped if absent)."""

import json
from pathlib import Path

import pytest
import torch

from empirical.config.paths import authors_dir, where_to_point
from empirical.runs.phases import RESTRICTED_SETS, detect_phases, mean_series, steepest_rise

AUTHORS = authors_dir()


def logistic(step, mid, width=100.0):
    import math

    return 1.0 / (1.0 + math.exp(min(700.0, -(step - mid) / width)))


def records(zero_mid, var_mid, restricted_mid):
    out = []
    for step in range(0, 20001, 250):
        z, v, r = (logistic(step, m) for m in (zero_mid, var_mid, restricted_mid))
        acc = {"0var/ind": z, "0var/pair": z}
        for name in ("1var/ind", "1var/pair", "2var/ind", "2var/pair"):
            acc[name] = v
        for name in ("1var/var", "1var/both", "2var/var", "2var/both"):
            acc[name] = r
        out.append({"step": step, "acc": acc})
    return out


def test_detects_three_phases_in_order():
    ph = detect_phases(records(2000, 5300, 15000))
    assert 2000 <= ph.zero_var_learned_step <= 2500
    assert ph.first_spike.start_step <= 5300 <= ph.first_spike.end_step
    assert ph.second_spike.start_step <= 15000 <= ph.second_spike.end_step
    assert ph.first_spike.gain > 0.8


def test_no_spike_when_accuracy_never_rises():
    ph = detect_phases(records(2000, 5300, 10**9))
    assert ph.second_spike is None
    ph = detect_phases(records(10**9, 10**9, 10**9))
    assert ph.zero_var_learned_step is None and ph.first_spike is None


def test_first_spike_is_searched_after_zero_var_is_learned():
    # variables rise a little together with 0-var, then sharply at 12 000
    out = []
    for step in range(0, 20001, 250):
        z = logistic(step, 1200)
        v = 0.5 * logistic(step, 1200) + 0.45 * logistic(step, 12000)
        acc = {"0var/ind": z}
        for name in ("1var/ind", "2var/ind"):
            acc[name] = v
        out.append({"step": step, "acc": acc})
    ph = detect_phases(out)
    assert ph.first_spike.start_step <= 12000 <= ph.first_spike.end_step


# -- the jump, the plateau, the rise through 90% (empirical.runs.phases docstring) ---------


def series_records(steps, zero, var, restricted):
    out = []
    for step, z, v, r in zip(steps, zero, var, restricted, strict=True):
        acc = {"0var/ind": z}
        for name in ("1var/ind", "1var/pair", "2var/ind", "2var/pair"):
            acc[name] = v
        for name in ("1var/var", "1var/both", "2var/var", "2var/both"):
            acc[name] = r
        out.append({"step": step, "acc": acc})
    return out


def test_jump_is_the_largest_consecutive_increase_inside_the_window():
    steps = list(range(0, 20001, 100))
    var = [0.6 if s < 5300 else 0.97 for s in steps]  # one jump between 5 200 and 5 300
    ph = detect_phases(series_records(steps, [1.0] * len(steps), var, [0.1] * len(steps)))
    fs = ph.first_spike
    assert (fs.jump_start_step, fs.jump_end_step) == (5200, 5300)
    assert fs.jump_gain == pytest.approx(0.37)
    assert fs.start_step <= 5200 and fs.end_step >= 5300
    assert fs.plateau_step == 5300 and fs.rule == "through_90"
    assert ph.second_spike is None


def test_second_spike_is_the_rise_that_learns_the_restricted_sets():
    # the authors' shape: the restricted mean rises WITH the first spike (0.2 -> 0.72), sits
    # on that plateau, and is learned only in a later, smaller rise (0.72 -> 0.98)
    steps = list(range(0, 30001, 100))
    var = [0.6 + 0.38 * logistic(s, 5350, 20) for s in steps]
    restricted = [
        0.2 + 0.52 * logistic(s, 6000, 150) + 0.26 * logistic(s, 15200, 200) for s in steps
    ]
    records_ = series_records(steps, [1.0] * len(steps), var, restricted)
    ph = detect_phases(records_)
    assert 5300 <= ph.first_spike.jump_start_step < ph.first_spike.jump_end_step <= 5400
    ss = ph.second_spike
    assert ss.rule == "through_90"
    assert 14500 <= ss.jump_start_step < ss.jump_end_step <= 16000
    assert ss.start_step >= ph.first_spike.plateau_step
    # the steepest window alone would report the co-rise with the first spike instead
    sr, rv = mean_series(records_, RESTRICTED_SETS)
    old = steepest_rise(sr, rv, 1000, 0.2, start=ph.first_spike.start_step)
    assert old.end_step < 8000


def test_one_spike_for_both_series_gives_no_separate_second_spike():
    steps = list(range(0, 12001, 250))
    both = [0.4 + 0.6 * logistic(s, 2500, 50) for s in steps]
    ph = detect_phases(series_records(steps, [1.0] * len(steps), both, both))
    assert ph.first_spike is not None
    assert ph.second_spike is None


def test_a_rise_that_never_reaches_90_percent_is_the_steepest_window():
    steps = list(range(0, 20001, 250))
    restricted = [0.1 + 0.6 * logistic(s, 12000, 100) for s in steps]  # 0.1 -> 0.7
    var = [0.5 + 0.49 * logistic(s, 4000, 100) for s in steps]
    ph = detect_phases(series_records(steps, [1.0] * len(steps), var, restricted))
    ss = ph.second_spike
    assert ss.rule == "steepest" and ss.reached_90_step is None
    assert ss.jump_start_step <= 12000 <= ss.jump_end_step


def test_coarse_log_still_sees_the_plateau_before_the_rise():
    # evaluated every 1 000 steps, a rise spread over 1 500 steps is found (window widened to
    # two evaluation intervals)
    steps = list(range(0, 30001, 1000))
    var = [0.6 if s < 5000 else 0.99 for s in steps]
    restricted = [0.74 if s < 15000 else (0.86 if s < 16000 else 0.98) for s in steps]
    restricted[:6] = [0.2] * 6
    ph = detect_phases(series_records(steps, [1.0] * len(steps), var, restricted))
    ss = ph.second_spike
    assert ss is not None and ss.gain == pytest.approx(0.24)
    assert 14000 <= ss.jump_start_step < ss.jump_end_step <= 16000


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def authors_run(tmp_path_factory):
    """The authors' checkpoints imported and evaluated at every step on 500 sequences per
    set: half the main job's subsample between full evaluations (configs/authors.toml,
    train.eval_subsample = 1000), so the spikes found here at 100-step resolution are found
    there too (and fast)."""
    src = AUTHORS / "checkpoints"
    config = Path(__file__).resolve().parents[1] / "configs" / "authors.toml"
    if not src.is_dir():
        pytest.skip(where_to_point(src))
    assert config.is_file(), f"{config} is missing from the repository"
    from empirical.runs.import_run import import_checkpoints
    from empirical.train.evaluate_run import evaluate_all_steps

    out = tmp_path_factory.mktemp("authors") / "run"
    threads = torch.get_num_threads()  # (module scope: set up before conftest's one thread)
    torch.set_num_threads(1)
    try:
        import_checkpoints(src, config, out, overrides=["task.eval_size=500"], command="test")
        records, summary = evaluate_all_steps(out)
    finally:
        torch.set_num_threads(threads)
    return out, records, summary


@pytest.mark.slow  # 112 checkpoints imported and evaluated: 25-35 s on 2 cores
def test_phases_and_timing_rows_of_the_authors_run_land_on_their_spikes(authors_run):
    out, records, summary = authors_run
    assert len(records) == 112
    ph = summary["phases"]
    first, second = ph["first_spike"], ph["second_spike"]
    # README: 1-var in-distribution 0.76 at 5 301 -> 0.99 at 5 401
    assert 5301 <= first["jump_start_step"] < first["jump_end_step"] <= 5401
    # README: 1-var var-restricted ~0.76 at 14 501, 0.97 at 15 501, 0.999 at 16 001
    assert 14501 <= second["jump_start_step"] < second["jump_end_step"] <= 16001
    assert second["start_step"] > first["end_step"]
    assert json.loads((out / "summary.json").read_text())["phases"] == ph
    # and the paper-check rows of the report judge both spikes on time
    first_row, second_row = timing_rows(first, second)
    assert first_row[3] == "yes" and second_row[3] == "yes"


def rise(a, b, start=None, end=None):
    return {
        "start_step": a if start is None else start,
        "end_step": b if end is None else end,
        "gain": 0.4,
        "reached_90_step": b,
        "jump_start_step": a,
        "jump_end_step": b,
    }


def timing_rows(first, second):
    from empirical.experiments.paper_checks import paper_check_rows

    summary = {"final_acc": {}, "phases": {"zero_var_learned_step": 100, "first_spike": first,
                                           "second_spike": second}}  # fmt: skip
    rows = {r[0]: r for r in paper_check_rows(summary, {})}
    return rows["first spike: variable routing"], rows["second spike: var-restricted sets"]


def test_paper_check_timing_holds_only_in_the_papers_windows():
    first, second = timing_rows(rise(5301, 5401, 4501, 6001), rise(15101, 15201, 14301, 16201))
    assert first[3] == "yes" and second[3] == "yes"
    assert "5301-5401" in first[2] and "4501-6001" in first[2]
    # a spike elsewhere is not the paper's, even if its window is wide
    first, second = timing_rows(rise(750, 1000, 250, 2000), rise(2000, 2250))
    assert first[3] == "no (timing)" and second[3] == "no (timing)"
    first, second = timing_rows(rise(5600, 5700), rise(16200, 16300))
    assert first[3] == "no (timing)" and second[3] == "no (timing)"
    # one evaluation interval either side of the stated window still holds
    first, second = timing_rows(rise(5250, 5500), rise(16000, 16100))
    assert first[3] == "yes" and second[3] == "yes"
    first, second = timing_rows(None, None)
    assert first[3] == "no" and first[2] == "none detected" and second[3] == "no"
    # a summary written before jumps were recorded: its window stands for the jump
    old = {"start_step": 14000, "end_step": 15000, "gain": 0.3, "reached_90_step": 15000}
    assert timing_rows(None, old)[1][3] == "yes"
