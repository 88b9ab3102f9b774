"""Phase detection on synthetic metric logs whose phase changes are known."""

from empirical.train.phases import detect_phases


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
