"""One run placed in its published population (docs/populations.md, "A single run in its
population"): per paper check this run's value, its percentile among the members and the
population's verdict, so that a run in the population's tail is told so. Published populations
are claims.json files under docs/results/populations/<name>/; a run's is the one whose
`config_fingerprint` equals its `population_fingerprint` (the most members where several do).

    section = population_section("runs/authors/seed0")   # "## This run in its population" ...
"""

from __future__ import annotations

import json
from pathlib import Path

from empirical.config.paths import repo_root
from empirical.experiments.population.claims import member_checks
from empirical.experiments.population.formatting import number, share_text
from empirical.experiments.population.members import (
    Member,
    dict_differences,
    existing_spike,
    population_config,
    population_fingerprint,
    read_analysis,
)
from empirical.report.population_stats import percentile_of
from empirical.report.tables import markdown_table
from empirical.runs.rundir import RunDir, SweepDir

TITLE = "## This run in its population"
TAIL_PERCENTILE = 5.0  # a value at or below the 5th (or at or above the 95th) percentile ...
MINORITY = 0.1  # ... or an outcome shared by at most this share of the members: in the tail


def published_dir() -> Path:
    """docs/results/populations/ of this repository."""
    return repo_root() / "docs" / "results" / "populations"


def _shown(path: Path) -> Path:
    """`path` relative to the repository where it lies inside it (no machine paths)."""
    try:
        return path.resolve().relative_to(repo_root())
    except ValueError:
        return path


def find_population(cfg, folder: str | Path | None = None) -> tuple[Path, dict] | None:
    """(path, claims) of the published population of `cfg`'s config (the one with the most
    members where several match), None if none matches. Unreadable files are passed over."""
    folder = Path(folder) if folder is not None else published_dir()
    want = population_fingerprint(cfg)
    best = None
    for path in sorted(folder.glob(f"*/{SweepDir.CLAIMS_JSON}")) if folder.is_dir() else []:
        try:
            claims = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(claims, dict) and claims.get("config_fingerprint") == want:
            if best is None or claims.get("members", 0) > best[1].get("members", 0):
                best = (path, claims)
    return best


def run_as_member(run_dir) -> Member:
    """A run directory read as a population member would be (its summary, metrics, analysis
    and first-spike numbers as they are on disk; nothing is computed)."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    summary = json.loads(run.summary.read_text()) if run.summary.exists() else {}
    records = run.read_metrics()
    return Member(run.name, int(cfg.seed), run.path, cfg, summary, records,
                  analysis=read_analysis(run), spike=existing_spike(run))  # fmt: skip


def place_run(run_dir, claims: dict) -> list[dict]:
    """Per claim of the population: {"claim", "outcome" (this run's: "yes", "no", ...; None:
    not measured), "value", "quantity", "percentile" (of the value among the members' values),
    "same_outcome" (how many members share this run's outcome, of how many), "population"
    (the claim's entry), "tail" (a sentence, or None)}."""
    member = run_as_member(run_dir)
    mine = member_checks(member)["checks"] if member.records else {}
    rows = []
    for entry in claims["claims"]:
        got = mine.get(entry["claim"])
        outcome = None if got is None or got[1] in (None, "-") else got[1]
        value = None if got is None else got[3]
        quantity = entry.get("quantity", "")
        measured = [o for o in entry.get("outcomes", []) if o is not None]
        yes = outcome == "yes"
        same = sum((o == "yes") == yes for o in measured) if outcome is not None else None
        pctl = percentile_of(entry.get("values", []), value) if value is not None else None
        tail = None
        if outcome is not None and measured and same / len(measured) <= MINORITY:
            tail = (f"'{outcome}' here, as in {same} of {len(measured)} members "
                    f"(the population: {entry['verdict']})")  # fmt: skip
        elif pctl is not None and (pctl <= TAIL_PERCENTILE or pctl >= 100 - TAIL_PERCENTILE):
            n = len([v for v in entry.get("values", []) if v is not None])
            side = "below" if pctl <= TAIL_PERCENTILE else "above"
            tail = (f"{number(value, quantity)} is {side} "
                    f"{'every member' if pctl in (0.0, 100.0) else 'nearly every member'} "
                    f"(percentile {pctl:.0f} of {n})")
        rows.append({
            "claim": entry["claim"], "kind": entry.get("kind", "paper"), "outcome": outcome,
            "value": value, "quantity": quantity, "percentile": pctl,
            "same_outcome": None if same is None else [same, len(measured)],
            "population": {k: entry.get(k) for k in ("holds", "of", "share", "ci95", "verdict")},
            "tail": tail,
        })  # fmt: skip
    return rows


def placement_table(rows: list[dict], who: str = "this run") -> list[str]:
    """The markdown table of place_run's rows and the tail sentence after it."""
    cells = []
    for r in rows:
        p = r["population"]
        mine = "-" if r["outcome"] is None else r["outcome"]
        if r["value"] is not None:
            mine += f" ({number(r['value'], r['quantity'])})"
        pctl = "-" if r["percentile"] is None else f"{r['percentile']:.0f}"
        cells.append(f"{r['claim']} | {mine} | {pctl} | {p['holds']} of {p['of']} | "
                     f"{share_text(p)} | {p['verdict']}")
    out = markdown_table(f"check | {who} | its percentile among the members | "
                         "population: holds in | share [95% CI] | verdict", cells)
    tails = [r for r in rows if r["tail"]]
    out.append("")
    if tails:
        out.append(f"**{who[0].upper() + who[1:]} is in the population's tail** on " + "; ".join(
            f"{r['claim']}: {r['tail']}" for r in tails) + f". Where {who} and the "
            f"population disagree, the population's verdict is the config's; {who} is one "
            "draw of it.")  # fmt: skip
    else:
        out.append(f"{who[0].upper() + who[1:]} lies within its population on every check.")
    return out


def paper_run_entry(run_dir, claims: dict) -> dict:
    """claims.json's `paper_run`: the paper's run (or any run) placed in a population that
    need not be of its config: {"run_dir", "same_config", "differences", "rows"}."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    same = population_fingerprint(cfg) == claims["config_fingerprint"]
    diff = [] if same else dict_differences(population_config(cfg),
                                             claims.get("population_config", {}))
    return {"run_dir": str(_shown(run.path)), "same_config": same, "differences": diff,
            "rows": place_run(run.path, claims)}  # fmt: skip


def population_section(run_dir, populations_dir: str | Path | None = None) -> str:
    """The markdown section "This run in its population" of report.md for the run in
    `run_dir`: one line when no published population matches its config."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    found = find_population(cfg, populations_dir)
    if found is None:
        where = Path(populations_dir) if populations_dir is not None else published_dir()
        shown = _shown(where)
        return (f"{TITLE}\n\nNo published population matches this run's config (none in "
                f"{shown}/ has config fingerprint {population_fingerprint(cfg)[:12]}): every "
                "verdict below is one draw.\n")  # fmt: skip
    path, claims = found
    rows = place_run(run.path, claims)
    out = [TITLE, ""]
    out += [
        f"The population of this config: `{claims['config']}`, {claims['members']} members "
        f"(seeds {', '.join(map(str, claims['seeds']))}), trained on {claims['device']} "
        f"([claims.md]({_shown(path.with_name(SweepDir.CLAIMS_MD))})). This run is one draw "
        f"of it; the verdicts are the population's ({claims['rule']}).",
        "",
        *placement_table(rows),
    ]
    return "\n".join(out) + "\n"
