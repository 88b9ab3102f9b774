"""Training windows of a comparison: named step ranges, and the mean and range of every main
number over the snapshots (or snapshot-to-snapshot updates) inside each: `parse_windows`
("plateau1=4801:5301,spike=5301:5401"), `default_windows` (from the detected phases),
`window_summary`. A window lo:hi holds the snapshots with lo <= step <= hi and the updates
(diff, diff_nodecay, diff_perp) with lo <= step and next_step <= hi (docs/compare_qk.md,
"Training windows").
"""

from __future__ import annotations

import re

import numpy as np

NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
UPDATES = ("diff", "diff_nodecay", "diff_perp")  # variants measured between snapshots
COS_VARIANTS = ("grad_ce", "grad_lin", "sgd_factored", "diff", "diff_nodecay", "diff_perp")
SUBS = ("all", "barv_barv")
TERM_BLOCKS = ("pred", "weights", "weights_frame", "grad_ce", "grad_lin", "diff", "diff_nodecay")
ATTRIBUTION = ("total", "w_qk", "vectors", "cross")


def parse_windows(text: str) -> list[tuple[str, int, int]]:
    """'name=lo:hi,name=lo:hi' -> [(name, lo, hi)] (ValueError with the reason)."""
    out: list[tuple[str, int, int]] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        name, eq, rng = part.partition("=")
        name = name.strip()
        if not eq or not NAME_RE.fullmatch(name):
            raise ValueError(f"window {part!r}: expected name=lo:hi (name of letters, digits, _.-)")
        lo_s, colon, hi_s = rng.partition(":")
        if not colon:
            raise ValueError(f"window {part!r}: expected name=lo:hi with lo <= hi")
        try:
            lo, hi = int(lo_s), int(hi_s)
        except ValueError:
            raise ValueError(f"window {part!r}: lo and hi must be integers (name=lo:hi)") from None
        if lo > hi:
            raise ValueError(f"window {part!r}: expected lo:hi with lo <= hi")
        if any(n == name for n, _, _ in out):
            raise ValueError(f"window {name!r} given twice")
        out.append((name, lo, hi))
    if not out:
        raise ValueError(f"no window in {text!r} (expected name=lo:hi,...)")
    return out


def _at_or_before(steps: list[int], x: int) -> int:
    before = [s for s in steps if s <= x]
    return before[-1] if before else steps[0]


def _at_or_after(steps: list[int], x: int) -> int:
    after = [s for s in steps if s >= x]
    return after[0] if after else steps[-1]


def default_windows(phases: dict | None, steps: list[int]) -> list[tuple[str, int, int]]:
    """Windows from the detected phases (empirical.runs.phases), on the snapshot grid:
    before_0var, plateau1, spike1 (the first spike's jump), plateau2, spike2, after
    (docs/compare_qk.md); empty or reversed ones left out; without phases, one window 'all'."""
    if not steps:
        return []
    first, last = steps[0], steps[-1]
    if not phases:
        return [("all", first, last)]
    out: list[tuple[str, int, int]] = []
    z = phases.get("zero_var_learned_step")
    start = first if z is None else _at_or_after(steps, z)
    if z is not None and start > first:
        out.append(("before_0var", first, start))
    s1, s2 = phases.get("first_spike"), phases.get("second_spike")

    def jump(s):
        lo = s.get("jump_start_step", s["start_step"])
        hi = s.get("jump_end_step", s["end_step"])
        return _at_or_before(steps, lo), _at_or_after(steps, hi)

    cursor = start
    if s1:
        j0, j1 = jump(s1)
        if j0 > cursor:
            out.append(("plateau1", cursor, j0))
        out.append(("spike1", j0, j1))
        cursor = max(j1, _at_or_after(steps, s1["end_step"]))
    if s2:
        k0, k1 = jump(s2)
        if k0 > cursor:
            out.append(("plateau2" if s1 else "plateau", cursor, k0))
        out.append(("spike2", k0, k1))
        cursor = k1
    if cursor < last:
        out.append(("after" if (s1 or s2) else "plateau", cursor, last))
    return out


def in_window(record: dict, lo: int, hi: int, update: bool) -> bool:
    if update:
        nxt = record.get("next_step")
        return nxt is not None and lo <= record["step"] and nxt <= hi
    return lo <= record["step"] <= hi


def stat(values) -> dict:
    """{'mean', 'min', 'max', 'n'} of the finite values (None where there are none)."""
    v = np.array([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "n": len(v)}


def _get(d, *keys):
    for k in keys:
        if d is None:
            return None
        d = d.get(k) if isinstance(d, dict) else None
    return d


# quantities measured at a snapshot: label -> path in a step record
SNAPSHOT_QUANTITIES = {
    "a (attention per operand position)": ("a",),
    "effective beta": ("beta",),
    "split-half cos of the CE gradient (noise floor), whole": (
        "split_half_cos_grad_ce", "all"),
    "split-half cos of the CE gradient (noise floor), bar_v": (
        "split_half_cos_grad_ce", "barv_barv"),
    "split-half cos of the first-order gradient, whole": ("split_half_cos_grad_lin", "all"),
    "split-half cos of the first-order gradient, bar_v": (
        "split_half_cos_grad_lin", "barv_barv"),
    "share of G1 the labelled vectors can express": ("pred_recoverable",),
    "emb: max abs cos W_E & W_pos rows (w/o co-occurring)": (
        "assumptions", "embeddings", "embeddings_max_abs_cos_excluding_cooccurring"),
    "emb: mean abs cos W_E & W_pos rows": (
        "assumptions", "embeddings", "embeddings", "mean_abs_cos"),
    "emb: max abs cos among variables' ebar": ("assumptions", "embeddings", "ebar", "max_abs_cos"),
    "emb: mean abs cos among variables' ebar": (
        "assumptions", "embeddings", "ebar", "mean_abs_cos"),
    "emb: max abs cos ebar vs embeddings": (
        "assumptions", "embeddings", "ebar_vs_embeddings_max_abs_cos"),
    "emb: max abs cos among number embeddings": (
        "assumptions", "embeddings", "numbers", "max_abs_cos"),
    "emb: effective rank (99%) of the numbers": (
        "assumptions", "embeddings", "numbers_effective_rank_99"),
    "MLP: isolated OV2-MLP2 accuracy": ("assumptions", "ov2_mlp2_accuracy"),
    "MLP: batch accuracy with ideal layer-2 routing": ("assumptions", "oracle_routing_accuracy"),
    "L1: `=` -> operand positions (mass)": ("assumptions", "l1_eq_to_operands_mass"),
    "L1: assigned number -> its variable (mass)": ("assumptions", "l1_num_to_prev_mass"),
    "L1: assigned number -> its variable (argmax)": ("assumptions", "l1_num_to_prev_argmax"),
    "L1: cos(output at `=`, ebar_v)": ("assumptions", "query_added_cos_ebar"),
    "L1: cos(output at a number, ebar of its variable)": ("assumptions", "number_added_cos_ebar"),
    "L2 `=` mass: number operand": ("attention", "mass", "number_operand"),
    "L2 `=` mass: variable operand": ("attention", "mass", "variable_operand"),
    "L2 `=` mass: bound number": ("attention", "mass", "bound_number"),
    "L2 `=` mass: other assigned numbers": ("attention", "mass", "other_assigned_numbers"),
    "accuracy 0var/ind (metrics)": ("metrics_acc", "0var/ind"),
    "accuracy 1var/ind (metrics)": ("metrics_acc", "1var/ind"),
    "accuracy 2var/ind (metrics)": ("metrics_acc", "2var/ind"),
    "accuracy 1var/var (metrics)": ("metrics_acc", "1var/var"),
    "accuracy 2var/var (metrics)": ("metrics_acc", "2var/var"),
}  # fmt: skip


def window_summary(
    records: list[dict], windows: list[tuple[str, int, int]], frame: str = "dual"
) -> dict:
    """name -> {'lo', 'hi', 'frame', 'snapshots': [steps], 'updates': [[step, next], ...],
    'cos': {frame: {variant: {sub: stat}}} (every frame the records have), 'null95_signs'
    (`frame`) and 'null95_gram' (score frame): {variant: {sub: stat}}, 'identity_rows',
    'attenuation_sign': {variant: stat} (`frame`), 'aw_share': {block: stat} (theorem_terms'
    aw_share_vs_memory), 'score_change' and 'score_change_share': {sub: {part: stat}}
    (updates.score_attribution), 'quantities': {label: stat}}. A stat's n is how many
    values its max was chosen from."""
    frames = list(dict.fromkeys(f for r in records for f in r.get("comparison", {})))
    return {name: window_entry(records, lo, hi, frames, frame) for name, lo, hi in windows}


def _stat_of(records: list[dict], *path) -> dict:
    """`stat` of the value at `path` in each record."""
    return stat(_get(r, *path) for r in records)


def _comparison_stats(snaps: list[dict], ups: list[dict], frames: list[str], frame: str) -> dict:
    """The per-variant statistics of a window's comparisons (`window_summary`'s 'cos',
    'null95_signs', 'null95_gram', 'identity_rows', 'attenuation_sign')."""

    def stats(f: str, var: str, *path) -> dict:
        return _stat_of(ups if var in UPDATES else snaps, "comparison", f, var, *path)

    def per_sub(f: str, key: str) -> dict:
        return {var: {sub: stats(f, var, key, sub) for sub in SUBS} for var in COS_VARIANTS}

    return {
        "cos": {f: per_sub(f, "cos") for f in frames},
        "null95_signs": per_sub(frame, "null95_signs"),
        "null95_gram": per_sub("score", "null95_gram"),
        "identity_rows": {
            var: stats(frame, var, "identity", "row_argmax_on_diag") for var in COS_VARIANTS
        },
        "attenuation_sign": {
            var: stats(frame, var, "attenuation", "fraction") for var in COS_VARIANTS
        },
    }


def window_entry(records: list[dict], lo: int, hi: int, frames: list[str], frame: str) -> dict:
    """One window's entry of `window_summary`."""
    snaps = [r for r in records if in_window(r, lo, hi, False)]
    ups = [r for r in records if in_window(r, lo, hi, True)]
    return {
        "lo": lo,
        "hi": hi,
        "snapshots": [r["step"] for r in snaps],
        "updates": [[r["step"], r["next_step"]] for r in ups],
        "frame": frame,
        **_comparison_stats(snaps, ups, frames, frame),
        "score_change": {
            sub: {k: _stat_of(ups, "score_change", "norm", sub, k) for k in ATTRIBUTION}
            for sub in SUBS
        },
        "score_change_share": {
            sub: {k: _stat_of(ups, "score_change", "share", sub, k) for k in ATTRIBUTION[1:]}
            for sub in SUBS
        },
        "aw_share": {
            blk: _stat_of(ups if blk in UPDATES else snaps, "terms", blk, "aw_share_vs_memory")
            for blk in TERM_BLOCKS
        },
        "quantities": {k: _stat_of(snaps, *path) for k, path in SNAPSHOT_QUANTITIES.items()},
    }
