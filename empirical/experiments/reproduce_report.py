"""`runs/<name>/report.md` of `python -m empirical reproduce`: its stages (Stage, one row each),
every paper check measured on our run and, where imported, on the paper authors' run, side by
side, and the figures (`render_report`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from empirical.experiments.paper_checks import paper_check_rows
from empirical.experiments.population.placement import population_section
from empirical.report.tables import markdown_table, pct
from empirical.runs.rundir import RunDir


@dataclass
class Stage:
    """One stage of `reproduce` as the report shows it: how it ended, how long it took, the
    last line it printed (or why it was skipped or failed), the outputs it links."""

    name: str
    status: str = "not run"
    seconds: float = 0.0
    detail: str = ""
    links: list[str] = field(default_factory=list)


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def render_report(
    cfg, root: Path, run_dir: Path, stages: list[Stage], paper_run: RunDir | None = None
) -> str:
    """report.md: the stages, then every claim one run can check, measured on this run and,
    where `paper_run` (the imported authors' run) is given, on the paper's own run."""
    run = RunDir(run_dir)
    summary = _load(run.summary)
    analysis = _load(run.analysis_dir() / RunDir.ANALYSIS_JSON)
    rel = f"seed{cfg.seed}"
    out = [f"# Reproduction report: {cfg.name}, seed {cfg.seed}", ""]
    out += [
        "Made by `python -m empirical reproduce`. Config: "
        f"[`{rel}/{RunDir.CONFIG}`]({rel}/{RunDir.CONFIG}). Claims, commands and multi-seed "
        "values: `paper_checks.md` in the repository. A claim holds only as the paper states "
        "it: a spike at other steps than the paper's is `no (timing)`.",
        "",
    ]
    rows = []
    for s in stages:
        links = ", ".join(f"[{Path(x).name}]({x})" for x in s.links)
        rows.append(f"{s.name} | {s.status} | {s.seconds:.0f} s | {s.detail} | {links}")
    out += ["## Stages", "", *markdown_table("stage | status | time | detail | output", rows)]
    out += ["", "## Paper checks", ""] + _paper_checks(summary, analysis, paper_run)
    out += ["", population_section(run.path).rstrip()]
    breakdown = summary.get("accuracy_by_operand_variable") or {}
    if breakdown:
        out += ["", "## Var-restricted sets by operand variable (this run)", ""]
        for name, cells in breakdown.items():
            text = ", ".join(f"{k} {pct(c['acc'])}" for k, c in cells.items())
            out.append(f"- {name}: {text}")
    figures = sorted(p.relative_to(root) for p in root.rglob("*.png"))
    out += ["", "## Figures", ""] + [f"- [{f}]({f})" for f in figures] + [""]
    return "\n".join(out)


def _paper_checks(summary: dict, analysis: dict, paper_run: RunDir | None) -> list[str]:
    """The paper-checks table: this run's column, and the paper's run's beside it if given."""
    ours = paper_check_rows(summary, analysis)
    if paper_run is None:
        return markdown_table("claim | paper | measured (this run) | holds", map(" | ".join, ours))
    their_rows = paper_check_rows(_load(paper_run.summary),
                                  _load(paper_run.analysis_dir() / RunDir.ANALYSIS_JSON))
    theirs = {row[0]: row for row in their_rows}
    rows = []
    for claim, paper, measured, holds in ours:
        _, _, their_value, their_holds = theirs.get(claim, (claim, paper, "-", "-"))
        rows.append(f"{claim} | {paper} | {measured} | {holds} | {their_value} | {their_holds}")
    header = "claim | paper | measured (this run) | holds | the paper's run | holds"
    return [
        "The paper's run: the authors' own checkpoints, imported and measured with the same "
        f"code ([{paper_run.name}]({paper_run.name}/)).",
        "",
        *markdown_table(header, rows),
    ]
