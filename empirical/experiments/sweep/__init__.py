"""Figure-3 sweeps and grids: many models of one architecture trained at once as one batched
model (docs/sweep.md, "Batching design", lists the modules).

    base, spec = load_sweep_config("configs/sweep_pairs.toml")
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")

The public names are imported on first use (disentangled.lazy_exports): the sweep and grid
configs load without torch.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "BatchedModel", "Member", "SweepError", "SweepOutcome", "SweepSpec", "expand_members",
    "find_threshold", "load_sweep_config", "metric_value", "run_sweep", "train_batch",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.model.batched": ["BatchedModel"],  # re-exported for compatibility
        "empirical.experiments.sweep.metrics": ["metric_value"],
        "empirical.experiments.sweep.param_sweep": ["SweepOutcome", "run_sweep"],
        "empirical.experiments.sweep.runner": ["SweepError"],
        "empirical.experiments.sweep.spec": ["Member", "SweepSpec", "expand_members",
                                             "load_sweep_config"],
        "empirical.experiments.sweep.thresholds": ["find_threshold"],
        "empirical.experiments.sweep.trainer": ["train_batch"],
    },
)
