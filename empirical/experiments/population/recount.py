"""A published claims.json brought to the present form from what it holds, without its members'
directories (issue #45): the spike claims split into presence and timing (from the members'
outcomes: "no (timing)" is a spike at other steps), every count with its lean, the paper's run
re-placed by rank from its recorded outcomes and values (its steps aligned to the members'
grid, what differs besides the config listed) and its jump steps read from the imported run.
`python -m empirical recount` (empirical/cli/recount.py) writes the result as `claims` does.

    claims = recount_claims(json.loads(path.read_text()), paper_run="runs/authors")
"""

from __future__ import annotations

from empirical.experiments.population.claims import count, second_without_first, with_paper_run
from empirical.experiments.population.placement import (
    IMPORTED_DIFFERENCES,
    grid_offset,
    members_every,
    paper_jumps,
    place_values,
)
from empirical.experiments.population.quantities import (
    FIRST_SPIKE_CLAIM,
    PRESENT,
    SECOND_SPIKE_CLAIM,
    TIMING,
)
from empirical.runs.rundir import RunDir

SPIKES = (FIRST_SPIKE_CLAIM, SECOND_SPIKE_CLAIM)


def _present(outcome):
    return None if outcome in (None, "-") else ("yes" if outcome in ("yes", "no (timing)")
                                                 else "no")  # fmt: skip


def _timing(outcome):
    return None if outcome in (None, "-") else ("yes" if outcome == "yes" else "no")


def split_entries(entries: list[dict]) -> list[dict]:
    """Claim entries with each spike claim replaced by its presence and its timing (counted
    from the members' outcomes), every entry recounted (its lean added)."""
    out = []
    for e in entries:
        if e["claim"] not in SPIKES:
            out.append({**e, **count(e["outcomes"])})
            continue
        for suffix, paper, judge in ((PRESENT, "a spike", _present), (TIMING, e["paper"], _timing)):
            outcomes = [judge(o) for o in e["outcomes"]]
            out.append({**e, "claim": e["claim"] + suffix, "paper": paper, **count(outcomes),
                        "outcomes": outcomes})  # fmt: skip
    return out


def split_rows(rows: list[dict]) -> dict[str, tuple]:
    """{claim: (outcome, value)} of a placed run's recorded rows, spike claims split."""
    out = {}
    for r in rows:
        if r["claim"] in SPIKES:
            out[r["claim"] + PRESENT] = (_present(r["outcome"]), r["value"])
            out[r["claim"] + TIMING] = (_timing(r["outcome"]), r["value"])
        else:
            out[r["claim"]] = (r["outcome"], r["value"])
    return out


def replace_paper_run(claims: dict, old: dict, paper_run=None) -> dict:
    """The paper's run's entry re-placed by rank from its recorded rows; its grid offset from
    its step-valued checks (its evaluation steps, as they show them); its jumps from the
    imported run in `paper_run` (a run directory: its summary.json), else none."""
    mine = split_rows(old["rows"])
    steps = [r["value"] for r in old["rows"] if r["value"] is not None and "step" in r["quantity"]]
    offset = grid_offset(steps, members_every(claims))
    rows = [place_values(e, *mine.get(e["claim"], (None, None)), None, offset)
            for e in claims["claims"]]  # fmt: skip
    jumps = {"first": None, "second": None}
    imported = bool(old.get("other_differences")) or paper_run is not None
    if paper_run is not None:
        run = RunDir(paper_run).require_run()
        jumps = paper_jumps(run.read_summary() or {})
        imported = run.imported.exists()
    entry = {**old, "other_differences": list(IMPORTED_DIFFERENCES) if imported else [],
             "grid_offset": offset, "jumps": jumps, "rows": rows}  # fmt: skip
    return with_paper_run(claims, entry)


def recount_claims(claims: dict, paper_run=None) -> dict:
    """claims.json's content in the present form (module docstring); `paper_run`: the paper's
    run directory, imported and evaluated, whose summary gives its jump steps."""
    out = {**claims, "claims": split_entries(claims["claims"])}
    jumps = claims["jumps"]
    out["jumps"] = {**jumps, "paper": None, "paper_interval": None,
                    "second_without_first": second_without_first(jumps["first"],
                                                                 jumps["second"])}  # fmt: skip
    out["recounted"] = ("from this file's own per-member outcomes and values (python -m "
                        "empirical recount): spike claims split, ranks, leans")  # fmt: skip
    if claims.get("paper_run"):
        out = replace_paper_run(out, claims["paper_run"], paper_run)
    return out
