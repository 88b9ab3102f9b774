"""Figure-3 sweeps: many models of one architecture trained at once as one batched model.

    from empirical.sweep import load_sweep_config, run_sweep
    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")
    outcome.results["threshold"]["threshold"]

Modules: `batched` (BatchedModel: stacked weights, batched fast forward), `trainer`
(train_batch: members trained together, each in a standard run directory), `spec`
(SweepSpec, members, batch keys), `results` (metrics, thresholds, summary, figure),
`runner` (run_sweep: plan, resume, train, summarize). See docs/sweep.md.
"""

from empirical.sweep.batched import BatchedModel
from empirical.sweep.results import find_threshold, metric_value
from empirical.sweep.runner import SweepError, SweepOutcome, run_sweep
from empirical.sweep.spec import Member, SweepSpec, expand_members, load_sweep_config
from empirical.sweep.trainer import train_batch

__all__ = [
    "BatchedModel",
    "Member",
    "SweepError",
    "SweepOutcome",
    "SweepSpec",
    "expand_members",
    "find_threshold",
    "load_sweep_config",
    "metric_value",
    "run_sweep",
    "train_batch",
]
