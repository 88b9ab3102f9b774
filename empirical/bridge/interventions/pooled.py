"""Interventions from several checkpoints pooled (issue #45, item 4; docs/attribution.md,
"`intervene`"): the continuations of each run (its interventions.json, as `intervene` wrote
it) side by side, and per condition the pooled count of continuations that jump (Wilson 95%),
each run's median jump step against its own `none`, its log-rank p, and the noise ceiling of
every run. `python -m empirical pool-interventions DIR ... --out OUT`.
"""

from __future__ import annotations

import json
from pathlib import Path

from empirical.bridge.interventions.outputs import logrank_vs_none
from empirical.report.population_stats import share_interval
from empirical.report.writer import Json, Report


def read_interventions(folder) -> dict:
    """One `intervene` output's interventions.json (its statistics)."""
    return json.loads((Path(folder) / "interventions.json").read_text())


def _logrank_p(source: dict, condition: str) -> float | None:
    """The log-rank p of `condition` against the source's `none`, computed again from the
    stored jump steps (so a file written before a fix of the test reads as it would now);
    the file's own p where the steps are not stored."""
    if condition == "none":
        return None
    conds = source["conditions"]
    times, base = conds[condition].get("jump_steps"), conds.get("none", {}).get("jump_steps")
    if times is None or base is None:
        return (conds[condition].get("logrank_vs_none") or {}).get("pvalue")
    return logrank_vs_none(times, base, source["last_step"])["pvalue"]


def pool(sources: list[dict], names: list[str]) -> dict:
    """{"sources": [{name, run_dir, start, ...}], "conditions": {condition: {"jumped", "n",
    "share", "share_interval", "per_source": [{name, jumped, n, median_jump, delay,
    logrank_p}]}}, "noise_ceiling": {name: its noise ceiling}} over the `sources`."""
    conditions: dict[str, dict] = {}
    for name, s in zip(names, sources, strict=True):
        base = s["conditions"].get("none", {}).get("median_jump")
        for cond, e in s["conditions"].items():
            entry = conditions.setdefault(cond, {"jumped": 0, "n": 0, "per_source": [],
                                                 "frozen_entries": e.get("frozen_entries")})
            entry["jumped"] += e["jumped"]
            entry["n"] += e["n"]
            med = e["median_jump"]
            entry["per_source"].append({
                "name": name, "jumped": e["jumped"], "n": e["n"], "median_jump": med,
                "delay": None if med is None or base is None else med - base,
                "logrank_p": _logrank_p(s, cond),
            })  # fmt: skip
    for entry in conditions.values():
        k, n = entry["jumped"], entry["n"]
        entry["share"] = k / n if n else None
        entry["share_interval"] = share_interval(k, n)
    return {
        "sources": [{"name": name, "run_dir": s.get("run_dir"), "checkpoint": s.get("checkpoint"),
                     "start": s["start"], "steps": s["steps"], "replicates": s["replicates"],
                     "jump": s["jump"]} for name, s in zip(names, sources, strict=True)],
        "conditions": conditions,
        "noise_ceiling": {name: s["noise_ceiling"] for name, s in zip(names, sources,
                                                                       strict=True)},
    }  # fmt: skip


def _delay(x) -> str:
    return "-" if x is None else f"{x:+.0f}"


def _source_text(p: dict) -> str:
    med = "-" if p["median_jump"] is None else f"{p['median_jump']:.0f}"
    lp = "-" if p["logrank_p"] is None else f"{p['logrank_p']:.2g}"
    return f"{p['name']} {p['jumped']}/{p['n']}, {med} ({_delay(p['delay'])}), p = {lp}"


def pooled_markdown(pooled: dict) -> str:
    srcs = pooled["sources"]
    lines = ["# Interventions pooled over checkpoints", "",
             "Sources: " + "; ".join(f"{s['name']} (step {s['start']}, {s['replicates']} data "
                                     f"orders per condition, {s['steps']} steps)" for s in srcs)
             + f". Jump: {srcs[0]['jump']}.", "",
             "| condition | weights frozen | jumped, pooled | share (95% Wilson) | per checkpoint: "
             "jumped, median jump step (against its none), log-rank p |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for cond, e in pooled["conditions"].items():
        lo, hi = e["share_interval"] or (float("nan"), float("nan"))
        per = "; ".join(_source_text(p) for p in e["per_source"])
        frozen = e.get("frozen_entries")
        lines.append(f"| {cond} | {frozen or '-'} | {e['jumped']}/{e['n']} | {e['share']:.2f} "
                     f"({lo:.2f}-{hi:.2f}) | {per} |")  # fmt: skip
    lines += ["", "Noise ceiling per checkpoint (cos between two `none` continuations' W_QK "
              "updates; their cos with G1; the share of their squared norm along G1):", "",
              "| checkpoint | steps | cos between replicates | cos with G1 | share along G1 |",
              "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for name, ceiling in pooled["noise_ceiling"].items():
        for h, e in ceiling.items():
            if e.get("cos_replicates_mean") is None:
                continue
            share = e.get("g1_share_mean")
            lines.append(f"| {name} | {h} | {e['cos_replicates_mean']:+.3f} +- "
                         f"{e['cos_replicates_sd']:.3f} | {e['cos_G1_mean']:+.3f} | "
                         f"{'-' if share is None else f'{100 * share:.1f}%'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def pooled_report(pooled: dict) -> Report:
    """pooled.json and summary.md."""
    return Report({"pooled.json": Json(pooled, indent=1), "summary.md": pooled_markdown(pooled)})
