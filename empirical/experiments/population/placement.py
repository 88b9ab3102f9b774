"""One run placed in its published population (docs/populations.md, "A single run in its
population"): per paper check this run's value, its rank among the members and the one-sided
p-value that rank gives, beside the population's verdict. Published populations are
claims.json files under docs/results/populations/<name>/; a run's is the one whose
`config_fingerprint` equals its `population_fingerprint` (the most members where several do).

A rank, not a percentile: among N members a run of the same process is as likely to take each
of the N + 1 places, so rank k (counted from the side the value lies towards, ties counted
against it) has the one-sided p = k / (N + 1). With N = 8 the smallest is 1/9 = 0.11: eight
members cannot put a run in a 5% tail, and a run beyond every member on one check of many is
expected (2 / (N + 1) per check, both sides). A run that is itself a member (the main job's
seed 0 is the population's seed 0) is placed against the other members; a run whose
evaluations fall on another grid (the paper's run: steps 1 + 100k) has its steps aligned to
the members' grid first.

    section = population_section("runs/authors/seed0")   # "## This run in its population" ...
"""

from __future__ import annotations

import json
from pathlib import Path

from empirical.config.paths import repo_root
from empirical.experiments.population.claims import member_checks
from empirical.experiments.population.formatting import number, verdict_text
from empirical.experiments.population.members import (
    Member,
    dict_differences,
    existing_spike,
    population_config,
    population_fingerprint,
    read_analysis,
)
from empirical.report.tables import markdown_table
from empirical.runs.rundir import RunDir, SweepDir

TITLE = "## This run in its population"
ALPHA = 0.05  # a rank's one-sided p at or below this: the run is in the population's tail
# what differs, besides the config, for a run trained by another codebase and imported
IMPORTED_DIFFERENCES = (
    "initialisation: the source's own (the paper's run: TransformerLens's default init, its "
    "seed 42), not this toolkit's seeded one (the init moves the first jump: docs/"
    "populations.md, paper_init against ours)",
    "data order: the source's own sampler and random stream",
    "device and precision: the source's training (the paper's run: a GPU with bf16 autocast), "
    "not the members' float32",
    "evaluation steps: the source's checkpoints (the paper's run: 1 + 100k, one update after "
    "the members' 100k), aligned to the members' grid before ranking",
)


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


def rank_among(values: list, value: float | None) -> dict | None:
    """The rank of `value` among the members' `values` (None entries left out): k = 1 + the
    members at least as far out on the side it lies towards ("above": >= it, "below": <= it;
    the smaller count), of N + 1, and the one-sided p = k / (N + 1). None without a value."""
    vals = [v for v in values if v is not None]
    if value is None or not vals:
        return None
    above = 1 + sum(v >= value for v in vals)
    below = 1 + sum(v <= value for v in vals)
    side = "above" if above <= below else "below"
    k = min(above, below)
    return {"rank": k, "of": len(vals) + 1, "side": side, "p": k / (len(vals) + 1),
            "beyond_all": k == 1}  # fmt: skip


def grid_offset(run_steps: list[int], every: int) -> int:
    """How far a run's evaluation steps lie off the members' grid of `every` steps: their
    common remainder (taken as negative past every / 2), 0 when they share none."""
    rests = {int(s) % every for s in run_steps if s > 0}
    if len(rests) != 1 or every <= 1:
        return 0
    r = rests.pop()
    return r if r <= every // 2 else r - every


def _rank_text(r: dict) -> str:
    side = "from the top" if r["side"] == "above" else "from the bottom"
    return f"rank {r['rank']} of {r['of']} {side} (p = {r['rank']}/{r['of']})"


def place_values(entry: dict, outcome, value, exclude: int | None = None,
                 offset: int = 0) -> dict:  # fmt: skip
    """One check's row for a run with `outcome` and `value` against the population's claim
    `entry` (its members' outcomes and values; member `exclude` left out; step values
    shifted by -`offset` onto the members' grid)."""
    quantity = entry.get("quantity", "")
    keep = [i for i in range(len(entry.get("outcomes", []))) if i != exclude]
    outcomes = [entry["outcomes"][i] for i in keep]
    values = [entry.get("values", [None] * len(keep))[i] for i in keep]
    aligned = value - offset if value is not None and "step" in quantity else value
    measured = [o for o in outcomes if o is not None]
    same = None
    if outcome is not None:
        same = sum((o == "yes") == (outcome == "yes") for o in measured)
    rank = rank_among(values, aligned)
    tail = None
    if same is not None and measured and (same + 1) / (len(measured) + 1) <= ALPHA:
        tail = f"'{outcome}' here, as in {same} of {len(measured)} members"
    elif rank is not None and rank["p"] <= ALPHA:
        tail = f"{number(aligned, quantity)}: {_rank_text(rank)}"
    return {"claim": entry["claim"], "kind": entry.get("kind", "paper"), "outcome": outcome,
            "value": value, "aligned_value": aligned, "quantity": quantity, "rank": rank,
            "same_outcome": None if same is None else [same, len(measured)],
            "population": {k: entry.get(k) for k in ("holds", "of", "share", "ci95", "verdict")},
            "tail": tail}  # fmt: skip


def place_member(claims: dict, index: int) -> list[dict]:
    """Member `index` of a population placed against the other members, from claims.json
    alone (its recorded outcome and value per claim): what report.md shows for a run that is
    that member (the main job's seed 0 is the population's seed 0)."""
    return [place_values(e, e["outcomes"][index], e["values"][index], exclude=index)
            for e in claims["claims"]]  # fmt: skip


def member_index(run: RunDir, cfg, claims: dict) -> int | None:
    """The population member this run is (a run we trained, of the population's config and
    one of its seeds: the same process as that member), or None (an imported run never is)."""
    if run.imported.exists() or population_fingerprint(cfg) != claims.get("config_fingerprint"):
        return None
    seeds = list(claims.get("seeds", []))
    return seeds.index(int(cfg.seed)) if int(cfg.seed) in seeds else None


def members_every(claims: dict) -> int:
    train = (claims.get("population_config") or {}).get("train", {})
    return int(train.get("eval_every", 250))


def place_run(run_dir, claims: dict) -> list[dict]:
    """Per claim of the population, `place_values`' row for the run in `run_dir` (a member of
    the population placed against the others; its steps aligned to the members' grid)."""
    run = RunDir(run_dir).require_run()
    member = run_as_member(run.path)
    mine = member_checks(member)["checks"] if member.records else {}
    exclude = member_index(run, member.config, claims)
    offset = grid_offset([r["step"] for r in member.records], members_every(claims))
    rows = []
    for entry in claims["claims"]:
        got = mine.get(entry["claim"])
        outcome = None if got is None or got[1] in (None, "-") else got[1]
        rows.append(place_values(entry, outcome, None if got is None else got[3], exclude,
                                 offset))  # fmt: skip
    return rows


def placement_table(rows: list[dict], who: str = "this run", members: int | None = None,
                    excluded: str | None = None) -> list[str]:  # fmt: skip
    """The markdown table of place_run's rows and the sentences after it: the tail, and what
    N members can show."""
    cells = []
    for r in rows:
        p = r["population"]
        mine = "-" if r["outcome"] is None else r["outcome"]
        if r["value"] is not None:
            mine += f" ({number(r['value'], r['quantity'])}"
            if r["aligned_value"] != r["value"]:
                mine += f"; on the members' grid {number(r['aligned_value'], r['quantity'])}"
            mine += ")"
        rank = "-" if r["rank"] is None else _rank_text(r["rank"])
        cells.append(f"{r['claim']} | {mine} | {rank} | {p['holds']} of {p['of']} | "
                     f"{verdict_text(p)}")
    Who = who[0].upper() + who[1:]
    out = markdown_table(f"check | {who} | its rank among the members and this run "
                         "(one-sided p) | population: holds in | verdict", cells)
    out.append("")
    if excluded:
        out += [f"{Who} is the population's {excluded}: it is placed against the other "
                "members.", ""]
    n = members if members is not None else max((r["rank"]["of"] - 1 for r in rows
                                                 if r["rank"]), default=0)  # fmt: skip
    if n:
        out += [f"With {n} members a rank gives p >= 1/{n + 1} = {1 / (n + 1):.3f}: beyond "
                f"every member is rank 1 of {n + 1}, which a run of the same process reaches "
                f"with probability 2/{n + 1} per check (either side); a tail at p <= {ALPHA} "
                f"needs {round(1 / ALPHA) - 1} members or more.", ""]
    tails = [r for r in rows if r["tail"]]
    if tails:
        out.append(f"**{Who} is in the population's tail (p <= {ALPHA})** on " + "; ".join(
            f"{r['claim']}: {r['tail']}" for r in tails) + ".")  # fmt: skip
    else:
        out.append(f"{Who} is in the population's tail (p <= {ALPHA}) on no check.")
    return out


def paper_run_entry(run_dir, claims: dict) -> dict:
    """claims.json's `paper_run`: the paper's run (or any run) placed in a population that
    need not be of its config: {"run_dir", "same_config", "differences" (of the config),
    "other_differences" (what differs besides it), "grid_offset", "jumps" (its first and
    second jump, from its summary), "rows"}."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    same = population_fingerprint(cfg) == claims["config_fingerprint"]
    diff = [] if same else dict_differences(population_config(cfg),
                                             claims.get("population_config", {}))
    member = run_as_member(run.path)
    offset = grid_offset([r["step"] for r in member.records], members_every(claims))
    return {"run_dir": str(_shown(run.path)), "same_config": same, "differences": diff,
            "other_differences": list(IMPORTED_DIFFERENCES) if run.imported.exists() else [],
            "grid_offset": offset, "jumps": paper_jumps(member.summary),
            "rows": place_run(run.path, claims)}  # fmt: skip


def paper_jumps(summary: dict) -> dict:
    """{"first": [evaluation before, evaluation after] of its jump, "second": ...} from a
    run's summary.json phases (None where it has no such spike)."""
    phases = summary.get("phases", {}) or {}
    out = {}
    for key in ("first", "second"):
        rise = phases.get(f"{key}_spike")
        if rise and rise.get("jump_end_step") is not None:
            out[key] = [int(rise["jump_start_step"]), int(rise["jump_end_step"])]
        else:
            out[key] = None
    return out


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
    index = member_index(run, cfg, claims)
    excluded = None if index is None else f"member {claims['member_names'][index]}"
    n = claims["members"] - (index is not None)
    out = [TITLE, ""]
    out += [
        f"The population of this config: `{claims['config']}`, {claims['members']} members "
        f"(seeds {', '.join(map(str, claims['seeds']))}), trained on {claims['device']} "
        f"([claims.md]({_shown(path.with_name(SweepDir.CLAIMS_MD))})). This run is one draw "
        f"of it; the verdicts are the population's ({claims['rule']}).",
        "",
        *placement_table(rows, members=n, excluded=excluded),
    ]
    return "\n".join(out) + "\n"
