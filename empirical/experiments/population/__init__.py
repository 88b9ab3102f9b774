"""Populations of runs: many seeds of one config, and how often each of the paper's claims holds
in them (issue #35; docs/populations.md; `python -m empirical claims`).

One module per job:

- `statistics`: Wilson intervals of shares, Kaplan-Meier survival with censoring, the log-rank
  and Fisher tests between populations, the multi-bootstrap over members and evaluation
  sequences, percentiles;
- `members`: reading member run directories, each checked to be a run of the population's
  config (`population_config`, `population_fingerprint`);
- `quantities`: what one run contributes (the number behind each paper check, jump steps,
  robust final accuracy, late collapses, the first spike's theory-vs-run cosines);
- `prepare`: the analysis and first-spike compare-qk a member needs, where missing;
- `claims`: the counts, intervals and verdicts (`verdict`: the stated rule);
- `figures`, `report`: the figures, claims.md and the files (`formatting`: how the reports
  write numbers);
- `compare`: populations against each other (log-rank, Fisher);
- `pipeline`: a population directory to its claims (the command's library side);
- `placement`: a single run placed in its published population (report.md's section).

The public names are imported on first use (disentangled.lazy_exports): importing the package
imports neither torch nor scipy.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "PopulationError",
    "compare_populations",
    "find_population",
    "fisher_exact",
    "kaplan_meier",
    "logrank",
    "multi_bootstrap",
    "percentile_of",
    "place_run",
    "population_claims",
    "population_fingerprint",
    "population_section",
    "share_interval",
    "summarize_population",
    "verdict",
    "write_claims",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.experiments.population.claims": ["population_claims", "verdict"],
        "empirical.experiments.population.compare": ["compare_populations"],
        "empirical.experiments.population.members": ["PopulationError", "population_fingerprint"],
        "empirical.experiments.population.pipeline": ["summarize_population"],
        "empirical.experiments.population.placement": [
            "find_population",
            "place_run",
            "population_section",
        ],
        "empirical.experiments.population.report": ["write_claims"],
        "empirical.experiments.population.statistics": [
            "fisher_exact",
            "kaplan_meier",
            "logrank",
            "multi_bootstrap",
            "percentile_of",
            "share_interval",
        ],
    },
)
