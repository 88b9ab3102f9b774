"""Populations of runs: many seeds of one config, and how often each of the paper's claims holds
in them (issue #35; docs/populations.md; `python -m empirical claims`). Modules: `options`
(PopulationOptions and the command's ClaimsOptions), `members` (reading member runs),
`quantities` (what one run contributes), `prepare` (its analyses), `claims` (counts and
verdicts), `figures`, `report` (claims.md and the population's files), `formatting`, `compare`
(populations against each other), `pipeline` (a directory to its claims), `placement` (one run
in its published population). The statistics: empirical.report.population_stats."""

__all__ = [
    "claims", "compare", "figures", "formatting", "members", "options", "pipeline", "placement",
    "prepare", "quantities", "report",
]  # fmt: skip
