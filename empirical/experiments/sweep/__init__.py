"""Figure-3 sweeps: many models of one architecture trained at once as one batched model.

    from empirical.experiments.sweep import load_sweep_config, run_sweep
    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")
    outcome.results["threshold"]["threshold"]

Modules: `trainer` (train_batch: members trained together as one
empirical.model.batched.BatchedModel by the shared training skeleton, each in a standard run
directory), `spec` (SweepSpec, members, variants, batch keys), `runner` (run_members: the one
runner of sweeps, grids and jobs), `param_sweep` (run_sweep), `grid` (run_grid), `metrics`,
`thresholds`, `collect` and `results` (a sweep's rows, summary and files: `summary_md`,
`figure`), `cluster` and `executors` (batches as jobs), `merge`. See docs/sweep.md. The public
names are imported on first use (disentangled.lazy_exports): the sweep and grid configs load
without torch.
"""

from disentangled.lazy_exports import lazy_exports

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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.model.batched": ["BatchedModel"],  # re-exported for compatibility
        "empirical.experiments.sweep.metrics": ["metric_value"],
        "empirical.experiments.sweep.param_sweep": ["SweepOutcome", "run_sweep"],
        "empirical.experiments.sweep.runner": ["SweepError"],
        "empirical.experiments.sweep.spec": [
            "Member",
            "SweepSpec",
            "expand_members",
            "load_sweep_config",
        ],
        "empirical.experiments.sweep.thresholds": ["find_threshold"],
        "empirical.experiments.sweep.trainer": ["train_batch"],
    },
)
