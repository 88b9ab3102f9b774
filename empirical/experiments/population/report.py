"""claims.md from claims.json's content, and the files of one population's claims, declared
once (`claims_report`).

    write_report(claims_report(claims), "runs/population/population_authors/claims/ours")
        # claims.json, claims.md, jumps.png, survival.png, final.png, theory.png
"""

from __future__ import annotations

from empirical.experiments.population import figures as plots
from empirical.experiments.population.formatting import share_text, summary_text, verdict_text
from empirical.experiments.population.placement import placement_table
from empirical.report.tables import markdown_table, pct
from empirical.report.writer import Figure, Json, Report
from empirical.runs.rundir import SweepDir

FIGURES = {
    "jumps": "jump steps over the members, the paper's run marked where the population is of "
    "its config",
    "survival": "share of members still before each jump (Kaplan-Meier, censored)",
    "final": "robust final vs last-step accuracy per set",
    "theory": "the first spike's QK update vs the theory's G1, per member",
}


def claims_markdown(claims: dict, fmt: str = "png") -> str:
    """claims.md: the header and verdict rule, then one section each for the claims, the
    jumps, the final accuracy, the late collapses, the paper's run (when placed), the members
    and the figures."""
    out = _header(claims)
    out += _claim_sections(claims, fmt)
    out += _jumps_section(claims["jumps"], fmt)
    out += _final_section(claims, fmt)
    out += _collapses_section(claims["collapses"])
    if claims.get("paper_run"):
        out += _paper_run_section(claims["paper_run"])
    out += _members_section(claims)
    out += ["", "## Figures", ""]
    out += [f"- [{stem}.{fmt}]({stem}.{fmt}): {what}" for stem, what in FIGURES.items()]
    return "\n".join(out) + "\n"


def _header(claims: dict) -> list[str]:
    n = claims["members"]
    out = [f"# Population claims: {claims['config']} ({n} members)", ""]
    out += [
        f"Made by `python -m empirical claims`. Variant `{claims['variant']}` "
        f"({' '.join(claims['overrides']) or 'the base config'}), {claims['steps']} steps, "
        f"seeds {', '.join(map(str, claims['seeds']))}. Trained on: {claims['device']}. "
        f"Summarised with torch {claims['torch']} at commit {claims['commit'] or 'unknown'}.",
        "",
        f"**Verdict rule.** {claims['rule']}. Every share comes with its Wilson 95% interval; "
        "every mean over members with its multi-bootstrap 95% interval (members resampled and, "
        "for accuracies, each member's evaluation sequences). The paper's single run, judged by "
        "the same rule, is 'one draw'.",
        "",
    ]
    if claims["not_counted"]:
        rows = ", ".join(f"{r['member']} ({r['status']}, step {r['step']})"
                         for r in claims["not_counted"])  # fmt: skip
        out += [f"Not counted: {rows}.", ""]
    return out


def _claim_sections(claims: dict, fmt: str) -> list[str]:
    """One table per kind of claim (paper checks, robust final, theory), with its notes."""
    window = claims.get("final_window", 2000)
    heading = {
        "paper": ("## Paper checks", "Each member judged by "
                  "`empirical.experiments.paper_checks` (the "
                  "definitions of report.md) at its last evaluation."),
        "robust": ("## The accuracy claims on the robust final accuracy", "The same checks "
                   f"on each set's mean over the evaluations of the last {window} steps (the value "
                   "at the last step is one point of an oscillation: see the final accuracy "
                   "below)."),
        "theory": ("## Theory vs run across the first spike", "Whether the cosine of "
                   "Theorem C.1's G1 with the observed layer-2 QK update across the snapshot "
                   "interval of the first spike's jump (compare-qk, "
                   f"{claims['theory'].get('frame') or 'dual'} frame) is above that update's "
                   "sign-randomised null (95%): 'no' is 'the update is at the null'."),
    }  # fmt: skip
    header = ("claim | paper | holds in | share [95% CI] | verdict | the number over members: "
              "mean [95% CI] (min to max, n)")
    out = []
    for kind, (title, text) in heading.items():
        rows = [c for c in claims["claims"] if c["kind"] == kind]
        if not rows:
            continue
        table = [
            f"{c['claim']} | {c['paper']} | {c['holds']} of {c['of']} | {share_text(c)} | "
            f"**{verdict_text(c)}** | {c['quantity']}: "
            f"{summary_text(c['values_summary'], c['quantity'])}"
            for c in rows
        ]
        out += [title, "", text, "", *markdown_table(header, table)]
        if kind == "paper" and claims.get("not_analysed"):
            out += ["", "Without analysis.json (its checks not counted for them): "
                    + "; ".join(f"{k} ({v})" for k, v in claims["not_analysed"].items()) + "."]
        if kind == "theory":
            out += _theory_notes(claims["theory"], fmt)
        out.append("")
    return out


def _theory_notes(th: dict, fmt: str) -> list[str]:
    out = ["", f"Cosines over the measured members: whole block "
           f"{summary_text(th['cos_whole_summary'])} against a null of "
           f"{summary_text(th['null_whole_summary'])}; bar_v block "
           f"{summary_text(th['cos_barv_summary'])} against "
           f"{summary_text(th['null_barv_summary'])}."]  # fmt: skip
    if th["not_measured"]:
        out.append("Not measured: " + "; ".join(f"{k} ({v})" for k, v in
                                                th["not_measured"].items()) + ".")
    return out + ["", f"![theory](theory.{fmt})"]


def _jumps_section(jumps: dict, fmt: str) -> list[str]:
    out = ["## Jumps", "", "The step each spike's largest rise between two evaluations ends at; "
           "a member without the jump is censored at its last step (Kaplan-Meier median: "
           "the step by which half the members are estimated past it).", ""]
    rows = []
    for key in ("first", "second"):
        surv = jumps[f"{key}_survival"]
        have = len(jumps[key]) - jumps[f"{key}_without"]
        pair = (jumps.get("paper_interval") or {}).get(key)
        paper = f"{pair[0]} -> {pair[1]}" if pair else "-"
        rows.append(f"{key} | {have} of {len(jumps[key])} | {surv['median'] or 'not reached'} | "
                    f"{summary_text(jumps[f'{key}_summary'], 'step')} | {paper}")
    out += markdown_table("spike | members with the jump | Kaplan-Meier median | mean over members "
                          "with it [95% CI] (min to max, n) | the paper's run", rows)
    alone = jumps.get("second_without_first")
    if alone:
        out += ["", f"Of the members with a second jump, {alone} have no first jump before it "
                "(none, or one at the same evaluation or later): a joint rise of every set, "
                "not the paper's second phase."]
    return out + ["", f"![jumps](jumps.{fmt})", "", f"![survival](survival.{fmt})", ""]


def _final_section(claims: dict, fmt: str) -> list[str]:
    window = claims.get("final_window", 2000)
    out = ["## Final accuracy per set", "",
           f"Robust final: the mean over the evaluations of the last {window} steps; beside it "
           "the value at the last step. Means over members with their multi-bootstrap 95% "
           "interval; how many members are at >= 99% by either reading.", ""]  # fmt: skip
    rows = []
    for s, st in claims["final_stats"].items():
        r, last = st["robust_at_least_99"], st["last_at_least_99"]
        rows.append(f"{s} | {summary_text(st['robust'], 'accuracy')} | "
                    f"{summary_text(st['last'], 'accuracy')} | {r['holds']} of {r['of']} | "
                    f"{last['holds']} of {last['of']}")
    out += markdown_table("set | robust final | at the last step | >= 99% (robust) | >= 99% "
                          "(last step)", rows)
    return out + ["", f"![final](final.{fmt})", ""]


def _collapses_section(col: dict) -> list[str]:
    out = ["## Late collapses", "", "A set that reached >= 99% and later fell below 95% "
           "(evaluations of the metrics log).", ""]
    hit = {s: e for s, e in col["by_set"].items() if e["holds"]}
    if not hit:
        return out + ["None in any member.", ""]
    rows = [f"{s} | {e['holds']} of {e['of']} ({', '.join(e['members'])}) | {share_text(e)} | "
            + ", ".join(map(str, sorted(e["collapse_steps"]))) for s, e in hit.items()]
    out += markdown_table("set | members with a collapse | share [95% CI] | fell at steps", rows)
    rows = [f"{ev['member']} | {ev['set']} | {ev['reached_step']} | {ev['collapse_step']} | "
            f"{pct(ev['lowest'])} | {ev['recovered_step'] or 'not by the end'}"
            for ev in col["events"]]
    header = "member | set | >= 99% from | below 95% at | lowest | back at 99%"
    return out + ["", *markdown_table(header, rows), ""]


def _paper_run_section(pr: dict) -> list[str]:
    config = ("the population's config" if pr["same_config"] else "another config ("
              + "; ".join(pr["differences"][:3]) + ")")  # fmt: skip
    other = pr.get("other_differences") or []
    besides = (["", "What differs besides the config:", "", *(f"- {d}" for d in other)]
               if other else [])  # fmt: skip
    return ["## The paper's run in this population", "",
            f"`{pr['run_dir']}`, a run of {config}, judged by the same checks and placed "
            "among the members by rank; by the verdict rule alone it is one draw.", *besides,
            "", *placement_table(pr["rows"], "the paper's run"), ""]  # fmt: skip


def _members_section(claims: dict) -> list[str]:
    jumps = claims["jumps"]
    paper = [c for c in claims["claims"] if c["kind"] == "paper"]
    rows = []
    for i, name in enumerate(claims["member_names"]):
        held = sum(c["outcomes"][i] == "yes" for c in paper)
        measured = sum(c["outcomes"][i] is not None for c in paper)
        rows.append(f"{name} | {claims['seeds'][i]} | {jumps['first'][i] or 'none'} | "
                    f"{jumps['second'][i] or 'none'} | {held} of {measured}")
    header = "member | seed | first jump | second jump | paper checks held"
    return ["## Members", "", *markdown_table(header, rows)]


def claims_report(claims: dict, fmt: str = "png") -> Report:
    """claims.json, claims.md (linking the figures in `fmt`) and the figures of one
    population (FIGURES)."""
    label = claims["variant"]
    return Report({
        SweepDir.CLAIMS_JSON: Json(claims, indent=1, plain=True),
        SweepDir.CLAIMS_MD: claims_markdown(claims, fmt),
        "jumps": Figure(lambda: plots.plot_jumps(claims)),
        "survival": Figure(lambda: plots.plot_survival([(label, claims)])),
        "final": Figure(lambda: plots.plot_final(claims)),
        "theory": Figure(lambda: plots.plot_theory(claims)),
    }, summary=None)  # fmt: skip
