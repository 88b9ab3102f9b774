"""A population's claims: every paper check counted over the members, with its interval and
its verdict by one stated rule (`verdict`, RULE; docs/populations.md, "The verdict rule"); the
jump steps, robust final accuracies, late collapses and the first spike's theory-vs-run
cosines over the members. A member counts for a claim when it measures it; "no (timing)"
counts as not holding.

    claims = population_claims(members, variant="ours", name="population_authors.ours")
    claims["claims"][0]   # {"claim", "holds": k, "of": n, "share", "ci95", "verdict", ...}
"""

from __future__ import annotations

from empirical.experiments.paper_checks import paper_check_rows
from empirical.experiments.population.members import (
    Member,
    population_config,
    population_fingerprint,
)
from empirical.experiments.population.quantities import (
    COLLAPSED,
    REACHED,
    ROBUST_WINDOW,
    THEORY_CLAIMS,
    claim_values,
    collapses,
    jump_steps,
    robust_final,
    robust_rows,
    robust_values,
    split_spike_checks,
    theory_outcomes,
)
from empirical.report.population_stats import (
    kaplan_meier,
    multi_bootstrap,
    share_interval,
)
from empirical.report.provenance import repository_commit, torch_version

HOLD_SHARE = 0.9
FAIL_SHARE = 0.1
VERDICTS = ("holds", "fails", "seed-dependent", "too few members", "one draw", "not measured")
RULE = (
    "holds: the claim holds in >= 90% of the members and the Wilson 95% interval of that share "
    "lies above 1/2; fails: in <= 10% and the interval lies below 1/2; one draw: a single run; "
    "too few members: the share is at either end but the interval reaches 1/2; seed-dependent: "
    "a share between 10% and 90%"
)


def verdict(k: int, n: int) -> str:
    """The population's verdict on a claim that holds in k of n members (RULE)."""
    if n == 0:
        return "not measured"
    if n == 1:
        return "one draw"
    share = k / n
    lo, hi = share_interval(k, n)
    if share >= HOLD_SHARE and lo > 0.5:
        return "holds"
    if share <= FAIL_SHARE and hi < 0.5:
        return "fails"
    if share >= HOLD_SHARE or share <= FAIL_SHARE:
        return "too few members"
    return "seed-dependent"


def count(outcomes: list[str | None]) -> dict:
    """{"holds": k, "of": n, "share", "ci95", "verdict"} of per-member outcomes ("yes", "no",
    "no (timing)", or None / "-" where the member does not measure the claim)."""
    measured = [o for o in outcomes if o not in (None, "-")]
    k, n = sum(o == "yes" for o in measured), len(measured)
    ci = share_interval(k, n)
    return {"holds": k, "of": n, "share": k / n if n else None, "ci95": list(ci) if ci else None,
            "verdict": verdict(k, n), "lean": lean(k, n)}  # fmt: skip


def lean(k: int, n: int) -> str | None:
    """Which way a share strictly inside (0, 1) leans: "towards holds" (> 1/2), "towards
    fails" (< 1/2), "even"; None at either end or without members."""
    if n == 0 or k in (0, n):
        return None
    return "towards holds" if 2 * k > n else ("towards fails" if 2 * k < n else "even")


def member_checks(member: Member, window: int = ROBUST_WINDOW) -> dict:
    """Everything one member contributes: {claim: (paper, outcome, quantity, value, kind)}
    over the paper checks, their robust-final versions and the theory claims, and its
    robust final accuracies, jumps and collapses."""
    summary, analysis = member.summary, member.analysis or {}
    sizes = summary.get("eval_set_sizes") or {}
    robust = robust_final(member.records, sizes, window)
    values = claim_values(summary, analysis) | robust_values(robust)
    checks = {}
    for claim, paper, _measured, holds in paper_check_rows(summary, analysis):
        q, v = values[claim]
        checks[claim] = (paper, holds, q, v, "paper")
    for claim, paper, _measured, holds in robust_rows(summary, robust):
        q, v = values[claim]
        checks[claim] = (paper, holds, q, v, "robust")
    for claim, (holds, cos) in theory_outcomes(member.spike).items():
        checks[claim] = ("(the theory: Theorem C.1's G1)", holds, "cosine with G1", cos, "theory")
    return {"checks": split_spike_checks(checks), "robust": robust, "jumps": jump_steps(summary),
            "collapses": collapses(member.records)}  # fmt: skip


def population_claims(
    members: list[Member], *, variant: str, name: str, overrides: list[str] | None = None,
    not_counted: list[dict] | None = None, window: int = ROBUST_WINDOW,
) -> dict:  # fmt: skip
    """claims.json's content for the finished `members` of one variant (of one population
    config, checked when read). `not_counted`: members not in the statistics ({"member",
    "status", "step"}). `window`: the robust final accuracy's window in steps."""
    if not members:
        raise ValueError("population_claims: no member")
    members = sorted(members, key=lambda m: m.seed)
    per = [member_checks(m, window) for m in members]
    sets = list(members[0].records[-1]["acc"])
    final, final_last, final_stats = final_accuracies(members, per, sets)
    by_set, events = collapses_by_set(members, per, sets)
    return {
        **provenance(members, name=name, variant=variant, overrides=overrides),
        "not_counted": list(not_counted or []), "rule": RULE, "final_window": window,
        "definitions": _definitions(window), "claims": claim_entries(per),
        "jumps": jumps_over(members, per), "final": final, "final_last": final_last,
        "final_stats": final_stats, "collapses": {"by_set": by_set, "events": events},
        "theory": theory_over(members), "theory_claims": list(THEORY_CLAIMS.values()),
        "not_analysed": {m.name: "; ".join(m.notes) or "no analysis.json" for m in members
                         if m.analysis is None},
    }  # fmt: skip


def provenance(members: list[Member], *, name: str, variant: str, overrides) -> dict:
    """Which population this is (config, variant, fingerprint), where and with what it ran
    (devices, torch, commit) and its members."""
    devices: dict[str, int] = {}
    for m in members:
        d = m.summary.get("device_name") or m.summary.get("device") or "unknown"
        devices[d] = devices.get(d, 0) + 1
    cfg = members[0].config
    return {
        "config": name, "variant": variant, "overrides": list(overrides or []),
        "config_fingerprint": population_fingerprint(cfg),
        "population_config": population_config(cfg),
        "device": ", ".join(devices) if len(devices) > 1 else next(iter(devices)),
        "devices": devices, "torch": torch_version(), "commit": repository_commit(),
        "members": len(members), "member_names": [m.name for m in members],
        "seeds": [m.seed for m in members], "steps": cfg.train.steps,
    }  # fmt: skip


def _definitions(window: int) -> dict:
    return {
        "robust_final": f"mean of the evaluations at steps s with last - {window} < s <= last",
        "jump": "the step each spike's largest rise between two evaluations ends at "
        "(empirical.runs.phases); members without one are censored at their last step",
        "collapse": f"a set that reached >= {REACHED:.0%} and later fell below {COLLAPSED:.0%}",
        "intervals": "shares: Wilson 95%; continuous quantities: multi-bootstrap 95% over "
        "members and, for accuracies, evaluation sequences",
        "theory": "cosine of Theorem C.1's G1 with the layer-2 QK update across the first "
        "spike's snapshot interval (compare-qk, headline frame), against its "
        "sign-randomised null (95%)",
    }


def claim_entries(per: list[dict]) -> list[dict]:
    """Every claim any member measures (member_checks' results `per`), counted over the
    members: paper checks in paper_check_rows' order, then robust and theory claims."""
    order = list(dict.fromkeys(claim for p in per for claim in p["checks"]))
    kinds = {"paper": 0, "robust": 1, "theory": 2}
    order.sort(key=lambda c: kinds[next(p["checks"][c][4] for p in per if c in p["checks"])])
    claims = []
    for claim in order:
        rows = [p["checks"].get(claim) for p in per]
        first = next(r for r in rows if r is not None)
        outcomes = [r[1] if r is not None and r[1] not in ("-",) else None for r in rows]
        values = [r[3] if r is not None else None for r in rows]
        claims.append({"claim": claim, "paper": first[0], "kind": first[4], **count(outcomes),
                       "outcomes": outcomes, "quantity": first[2], "values": values,
                       "values_summary": multi_bootstrap(values)})
    return claims


def jumps_over(members: list[Member], per: list[dict]) -> dict:
    """Each spike's jump step per member, its Kaplan-Meier survival (members without the
    jump censored at their last step) and summary; the paper's run's are added when it is
    placed (`with_paper_run`)."""
    last_steps = [m.final_step for m in members]
    # the paper's run's jumps are read from that run when it is placed (pipeline: --paper-run)
    jumps: dict = {"paper": None, "paper_interval": None, "last_step": last_steps}
    for which in ("first", "second"):
        steps = [p["jumps"][which] for p in per]
        jumps[which] = steps
        jumps[f"{which}_without"] = sum(s is None for s in steps)
        jumps[f"{which}_survival"] = kaplan_meier(steps, last_steps).to_dict()
        jumps[f"{which}_summary"] = multi_bootstrap(steps)
    jumps["second_without_first"] = second_without_first(jumps["first"], jumps["second"])
    return jumps


def second_without_first(first: list, second: list) -> int:
    """Members whose second jump (the var-restricted sets) has no first jump before it: no
    first jump at all, or one at the same evaluation or later. Such a "second spike" is a
    joint rise of every set, not the paper's second phase after a first."""
    return sum(b is not None and (a is None or a >= b) for a, b in zip(first, second, strict=True))


def with_paper_run(claims: dict, entry: dict) -> dict:
    """`claims` with the paper's run placed (`entry`: placement.paper_run_entry's) and its
    jumps (read from that run's summary) as the jumps' "paper" and "paper_interval"."""
    jumps = entry.get("jumps") or {}
    paper = {k: (v[1] if v else None) for k, v in jumps.items()}
    return {**claims, "paper_run": entry,
            "jumps": {**claims["jumps"], "paper": paper, "paper_interval": jumps}}  # fmt: skip


def final_accuracies(members: list[Member], per: list[dict], sets: list[str]):
    """(robust final accuracy per set and member, last-step accuracy per set and member,
    their statistics per set)."""
    final, final_last, final_stats = {}, {}, {}
    for s in sets:
        robust = [p["robust"].get(s, {}).get("acc") for p in per]
        robust_n = [p["robust"].get(s, {}).get("n") for p in per]
        last = [m.summary.get("final_acc", {}).get(s) for m in members]
        last_n = [(m.summary.get("eval_set_sizes") or {}).get(s) for m in members]
        final[s], final_last[s] = robust, last
        final_stats[s] = {
            "robust": multi_bootstrap(robust, robust_n if all(robust_n) else None),
            "last": multi_bootstrap(last, last_n if all(last_n) else None),
            "robust_at_least_99": _at_least_99(robust),
            "last_at_least_99": _at_least_99(last),
            "n_evals": [p["robust"].get(s, {}).get("n_evals") for p in per],
        }  # fmt: skip
    return final, final_last, final_stats


def _at_least_99(values: list) -> dict:
    return count(["yes" if a is not None and a >= 0.99 else "no" for a in values])


def collapses_by_set(members: list[Member], per: list[dict], sets: list[str]):
    """(per set: how many members collapsed late, which, at what steps; every collapse)."""
    falls = {s: [] for s in sets}
    for m, p in zip(members, per, strict=True):
        for c in p["collapses"]:
            falls.setdefault(c["set"], []).append({"member": m.name, **c})
    by_set = {}
    for s, rows in falls.items():
        hit = sorted({r["member"] for r in rows})
        by_set[s] = {**count(["yes" if m.name in hit else "no" for m in members]), "members": hit,
                     "collapse_steps": [r["collapse_step"] for r in rows]}  # fmt: skip
    return by_set, [c for s in falls.values() for c in s]


def theory_over(members: list[Member]) -> dict:
    """The first spike's theory-vs-run cosines and their nulls per member, with summaries."""
    theory = {
        key: [m.spike.get(key) if m.spike else None for m in members]
        for key in ("cos_whole", "cos_barv", "null_whole", "null_barv", "updates")
    }
    theory["frame"] = next((m.spike["frame"] for m in members if m.spike), None)
    theory["not_measured"] = {m.name: "; ".join(m.notes) or "no first spike" for m in members
                              if not m.spike}  # fmt: skip
    for key in ("cos_whole", "cos_barv", "null_whole", "null_barv"):
        theory[f"{key}_summary"] = multi_bootstrap(theory[key])
    return theory
