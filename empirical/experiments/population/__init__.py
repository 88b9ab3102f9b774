"""Populations of runs: many seeds of one config, and how often each of the paper's claims holds
in them (issue #35; docs/populations.md; `python -m empirical claims`). Modules: `statistics`,
`members` (reading member runs), `quantities` (what one run contributes), `prepare` (its
analyses), `claims` (counts and verdicts), `figures`, `report`, `formatting`, `compare`
(populations against each other), `pipeline` (a directory to its claims), `placement` (one run
in its published population).

The public names are imported on first use (disentangled.lazy_exports): importing the package
imports neither torch nor scipy.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "PopulationError", "compare_populations", "find_population", "fisher_exact", "kaplan_meier",
    "logrank", "multi_bootstrap", "percentile_of", "place_run", "population_claims",
    "population_fingerprint", "population_section", "share_interval", "summarize_population",
    "verdict", "write_claims",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.experiments.population.claims": ["population_claims", "verdict"],
        "empirical.experiments.population.compare": ["compare_populations"],
        "empirical.experiments.population.members": ["PopulationError", "population_fingerprint"],
        "empirical.experiments.population.pipeline": ["summarize_population"],
        "empirical.experiments.population.placement": ["find_population", "place_run",
                                                       "population_section"],
        "empirical.experiments.population.report": ["write_claims"],
        "empirical.report.population_stats": [
            "fisher_exact", "kaplan_meier", "logrank", "multi_bootstrap", "percentile_of",
            "share_interval",
        ],
    },
)
