"""The same window attributed along two paths (issue #45, item 3; docs/attribution.md,
"Does the split depend on the path?"): the straight lines between the run's snapshots and the
replayed training steps. The total change of every target is the same along both (the same
end points); its split into groups is not. Per target and group: each path's share (part /
total), their difference, and each path's sum of |share| over the groups (1: the groups'
parts all have the total's sign; above 1: parts cancel).

    cmp = compare_paths(straight_result, replay_result)
    write_report(comparison_report(cmp), out / "3300_3600")     # paths.json, paths.md
"""

from __future__ import annotations

from empirical.report.writer import Json, Report

TOTALS_AGREE = 1e-9  # relative: the two paths' totals are one number (the same end points)


def shares(target: dict) -> dict[str, float | None]:
    """Each group's part over the target's total change (None when the total is 0)."""
    total = target["total"]
    return {g: (v / total if total else None) for g, v in target["groups"].items()}


def cancellation(target: dict) -> float | None:
    """sum over groups of |part| / |total|: 1 when every part has the total's sign, larger
    the more the parts cancel (None when the total is 0)."""
    total = target["total"]
    return sum(abs(v) for v in target["groups"].values()) / abs(total) if total else None


def compare_paths(first: dict, second: dict) -> dict:
    """{"window", "paths": [kind, kind], "targets": {target: {"total", "totals_rel_diff",
    "residual_rel": [a, b], "shares": {group: [a, b, b - a]}, "sum_abs_share": [a, b],
    "largest_difference": [group, b - a]}}} of two attributions of one window (their
    results, as attribute_window returns them)."""
    if first["window"] != second["window"]:
        raise ValueError(f"windows differ: {first['window']} and {second['window']}")
    kinds = [first["path"]["kind"], second["path"]["kind"]]
    out = {}
    for name, a in first["targets"].items():
        b = second["targets"].get(name)
        if b is None:
            continue
        scale = max(abs(a["total"]), abs(b["total"]), 1e-300)
        sa, sb = shares(a), shares(b)
        per = {g: [sa[g], sb[g], None if sa[g] is None or sb[g] is None else sb[g] - sa[g]]
               for g in sa}  # fmt: skip
        diffs = [(g, d[2]) for g, d in per.items() if d[2] is not None]
        out[name] = {
            "total": a["total"], "totals_rel_diff": abs(a["total"] - b["total"]) / scale,
            "residual_rel": [a["residual_rel"], b["residual_rel"]], "shares": per,
            "sum_abs_share": [cancellation(a), cancellation(b)],
            "largest_difference": list(max(diffs, key=lambda x: abs(x[1]))) if diffs else None,
        }  # fmt: skip
    return {"window": first["window"], "paths": kinds,
            "rules": [first.get("rule"), second.get("rule")], "targets": out}  # fmt: skip


def _f(x) -> str:
    return "-" if x is None else f"{x:+.2f}"


def comparison_markdown(cmp: dict) -> str:
    a, b = cmp["paths"]
    lo, hi = cmp["window"]
    lines = [f"# Steps {lo} -> {hi} attributed along two paths: {a} and {b}", "",
             f"Rules: {a} {cmp['rules'][0]}, {b} {cmp['rules'][1]}. A share is a group's part "
             "of the target's total change (the same total along both paths); per group the "
             f"{a} path's share, the {b} path's, and their difference ({b} - {a}); sum |share|: "
             "1 when no group works against the total, more when the parts cancel.", ""]
    groups = list(next(iter(cmp["targets"].values()))["shares"]) if cmp["targets"] else []
    lines += ["| target | total | " + " | ".join(groups) + f" | sum abs share ({a} / {b}) | "
              "largest difference |",
              "| --- | --- | " + " | ".join("---" for _ in groups) + " | --- | --- |"]
    for name, t in cmp["targets"].items():
        cells = [f"{_f(t['shares'][g][0])} / {_f(t['shares'][g][1])} ({_f(t['shares'][g][2])})"
                 for g in groups]  # fmt: skip
        sa, sb = t["sum_abs_share"]
        big = t["largest_difference"]
        lines.append(f"| {name} | {t['total']:+.4g} | " + " | ".join(cells) + " | "
                     f"{'-' if sa is None else f'{sa:.2f}'} / {'-' if sb is None else f'{sb:.2f}'}"
                     f" | {'-' if big is None else f'{big[0]} {big[1]:+.2f}'} |")
    worst = max((t["totals_rel_diff"] for t in cmp["targets"].values()), default=0.0)
    lines += ["", f"The two paths' totals agree to {worst:.1e} (relative) on every target."]
    return "\n".join(lines) + "\n"


def comparison_report(cmp: dict) -> Report:
    """paths.json and paths.md of one window."""
    return Report({"paths.json": Json(cmp, indent=1), "paths.md": comparison_markdown(cmp)},
                  summary="paths.md")  # fmt: skip
