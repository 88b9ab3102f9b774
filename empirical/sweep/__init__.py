"""Figure-3 sweeps: many models of one architecture trained at once as one batched model.

    from empirical.sweep import load_sweep_config, run_sweep
    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")
    outcome.results["threshold"]["threshold"]

Modules: `trainer` (train_batch: members trained together as one
empirical.model.batched.BatchedModel by the shared training skeleton, each in a standard run
directory), `spec` (SweepSpec, members, variants, batch keys), `runner` (run_members: the one
runner of sweeps and grids; run_sweep), `grid` (run_grid), `results` (metrics, thresholds,
summary, figure). See docs/sweep.md.
"""

from empirical.model.batched import BatchedModel  # re-exported for compatibility
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
