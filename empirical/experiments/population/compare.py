"""Two or more populations (variants of one grid config) against each other: the log-rank test
of their jump steps, Fisher's exact test of each claim's counts, and per evaluation set their
robust final accuracies (the mean over members with its multi-bootstrap interval, the members
at >= SHARE_AT of it with a Wilson interval and Fisher's test, the Mann-Whitney U test of the
members' accuracies).

    cmp = compare_populations({"ours": claims_a, "paper_init": claims_b})
    write_report(comparison_report(cmp, {"ours": claims_a, ...}), "runs/.../claims/comparison")
"""

from __future__ import annotations

from itertools import combinations

from empirical.experiments.population.claims import second_without_first
from empirical.experiments.population.figures import plot_survival
from empirical.report.population_stats import (
    fisher_exact,
    logrank,
    mann_whitney,
    share_interval,
)
from empirical.report.tables import markdown_table
from empirical.report.writer import Figure, Json, Report


def compare_populations(populations: dict[str, dict]) -> dict:
    """{"variants", "members", "pairs": [{"a", "b", "jumps": {first, second: log-rank},
    "claims": [{"claim", "a": [k, n], "b": [k, n], "fisher_p"}]}]} for every pair of
    populations (claims.json contents, by variant name)."""
    pairs = []
    for a, b in combinations(populations, 2):
        ca, cb = populations[a], populations[b]
        jumps = {
            key: logrank(ca["jumps"][key], ca["jumps"]["last_step"], cb["jumps"][key],
                         cb["jumps"]["last_step"])
            for key in ("first", "second")
        }  # fmt: skip
        by_claim = {c["claim"]: c for c in cb["claims"]}
        rows = []
        for c in ca["claims"]:
            d = by_claim.get(c["claim"])
            if d is None:
                continue
            rows.append({
                "claim": c["claim"], "a": [c["holds"], c["of"]], "b": [d["holds"], d["of"]],
                "fisher_p": fisher_exact(c["holds"], c["of"], d["holds"], d["of"]),
            })  # fmt: skip
        pairs.append({"a": a, "b": b, "jumps": jumps, "claims": rows,
                      "accuracy": accuracy_rows(ca, cb)})  # fmt: skip
    return {
        "variants": list(populations), "members": {k: v["members"] for k, v in populations.items()},
        "second_without_first": {
            k: [second_without_first(v["jumps"]["first"], v["jumps"]["second"]),
                sum(s is not None for s in v["jumps"]["second"])]
            for k, v in populations.items()
        },
        "tests": "jump steps: log-rank, two-sided, members without a jump censored at their "
        "last step; claims: Fisher's exact test of the counts, two-sided; robust final "
        f"accuracy per set: Mann-Whitney U of the members' values, two-sided, and Fisher's test "
        f"of the members at >= {SHARE_AT:.0%}",
        "pairs": pairs,
    }  # fmt: skip


SHARE_AT = 0.9  # a member "has" a set when its robust final accuracy there is at least this


def _share(values: list) -> dict:
    kept = [v for v in values if v is not None]
    k = sum(v >= SHARE_AT for v in kept)
    return {"k": k, "n": len(kept), "ci95": share_interval(k, len(kept)) if kept else None}


def accuracy_rows(ca: dict, cb: dict) -> list[dict]:
    """Per evaluation set both populations have: each one's robust final accuracy (mean,
    multi-bootstrap interval: claims.json's final_stats), its members at >= SHARE_AT (Wilson
    interval), Fisher's p of those counts and the Mann-Whitney U test of the values."""
    rows = []
    for s, values_a in (ca.get("final") or {}).items():
        values_b = (cb.get("final") or {}).get(s)
        if values_b is None:
            continue
        sa, sb = _share(values_a), _share(values_b)
        rows.append({
            "set": s, "a": ca["final_stats"][s]["robust"], "b": cb["final_stats"][s]["robust"],
            "share_a": sa, "share_b": sb,
            "fisher_p": fisher_exact(sa["k"], sa["n"], sb["k"], sb["n"]),
            "mann_whitney": mann_whitney(values_a, values_b),
        })  # fmt: skip
    return rows


def _mean_ci(st) -> str:
    if not st:
        return "-"
    lo, hi = st["ci95"]
    return f"{100 * st['mean']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _share_text(sh: dict) -> str:
    if not sh["n"]:
        return "-"
    lo, hi = sh["ci95"]
    return f"{sh['k']} of {sh['n']} [{100 * lo:.0f}, {100 * hi:.0f}]%"


def accuracy_markdown(pair: dict) -> list[str]:
    a, b = pair["a"], pair["b"]
    rows = [f"{r['set']} | {_mean_ci(r['a'])} | {_mean_ci(r['b'])} | "
            f"{_p(r['mann_whitney']['pvalue'])} | {_share_text(r['share_a'])} | "
            f"{_share_text(r['share_b'])} | {_p(r['fisher_p'])}"
            for r in pair.get("accuracy", [])]  # fmt: skip
    if not rows:
        return []
    return [*markdown_table(
        f"set (robust final) | {a}: mean [95%] | {b}: mean [95%] | Mann-Whitney p | {a} >= "
        f"{SHARE_AT:.0%} | {b} >= {SHARE_AT:.0%} | Fisher p", rows), ""]  # fmt: skip


def _p(p) -> str:
    return "-" if p is None else f"{p:.3g}"


def comparison_markdown(cmp: dict, fmt: str = "png") -> str:
    out = ["# Populations compared: " + ", ".join(cmp["variants"]), ""]
    out += [", ".join(f"`{k}`: {n} members" for k, n in cmp["members"].items()) + ". "
            + cmp["tests"] + ".", ""]  # fmt: skip
    alone = cmp.get("second_without_first") or {}
    if any(k for k, _ in alone.values()):
        out += ["Second jumps with no first jump before them (a joint rise of every set, not "
                "the paper's second phase): " + ", ".join(f"{name} {k} of {n}" for name, (k, n)
                                                          in alone.items()) + ".", ""]  # fmt: skip
    for pair in cmp["pairs"]:
        a, b = pair["a"], pair["b"]
        jumps = []
        for key, t in pair["jumps"].items():
            (ea, eb), (na, nb) = t["events"], t["n"]
            jumps.append(f"{key} | {a} {ea} of {na}, {b} {eb} of {nb} | {_p(t['pvalue'])}")
        claims = [f"{r['claim']} | {r['a'][0]} of {r['a'][1]} | {r['b'][0]} of {r['b'][1]} | "
                  f"{_p(r['fisher_p'])}" for r in pair["claims"]]
        out += [f"## {a} vs {b}", "", *markdown_table("jump | members with it | log-rank p", jumps)]
        out += ["", *markdown_table(f"claim | {a} | {b} | Fisher p", claims), ""]
        out += accuracy_markdown(pair)
    out += [f"![survival](survival.{fmt})", ""]
    return "\n".join(out)


def comparison_report(cmp: dict, populations: dict[str, dict], fmt: str = "png") -> Report:
    """comparison.json, comparison.md and survival.png (every population's Kaplan-Meier
    curves, each later population's log-rank p against the first in its legend), for
    OUT/claims/comparison."""
    base = cmp["variants"][0]
    pvalues = {pair["b"]: {k: v["pvalue"] for k, v in pair["jumps"].items()}
               for pair in cmp["pairs"] if pair["a"] == base}  # fmt: skip
    return Report({
        "comparison.json": Json(cmp, indent=1, plain=True),
        "comparison.md": comparison_markdown(cmp, fmt),
        "survival": Figure(lambda: plot_survival(list(populations.items()), pvalues=pvalues)),
    }, summary=None)  # fmt: skip
