"""Figure-3 sweeps and grids: many models of one architecture trained at once as one batched
model (docs/sweep.md, "Batching design"). Modules: `spec` (what a sweep or a grid is, loaded
without torch), `options` (the commands' options and the executor's), `runner` (the one runner
of members), `trainer` (a batch trained), `cluster` (batches as submitit jobs), `param_sweep`
(a sweep end to end), `grid` (a grid end to end), `collect`, `metrics`, `thresholds`,
`results`, `summary_md`, `figure` (a sweep's summary and its files), `merge` (sweeps trained
apart, pooled).

    base, spec = load_sweep_config("configs/sweep_pairs.toml")         # spec
    outcome = run_sweep(base, spec, "runs/sweep/sweep_pairs")           # param_sweep
"""

__all__ = [
    "cluster", "collect", "figure", "grid", "merge", "metrics", "options", "param_sweep",
    "results", "runner", "spec", "summary_md", "thresholds", "trainer",
]  # fmt: skip
