"""Theorem C.1's predicted layer-2 key-query update against trained checkpoints
(docs/compare_qk.md).

    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.outputs import report
    from empirical.bridge.compare_qk.run_comparison import compare_run
    from empirical.report.writer import write_report
    result = compare_run("runs/paper/seed0", Options(steps=[1000, 2000]))
    write_report(report(result), "runs/paper/seed0/compare_qk")

Modules: options (what a comparison varies, the command's flags; no torch), coords, frames,
prediction, observe, updates, metrics, snapshot, one_step, windows, follow, run_comparison,
summary (summary.md), plots and step_plots (figures), outputs (the files: `report`).
"""

__all__ = [
    "coords", "follow", "frames", "metrics", "observe", "one_step", "options", "outputs", "plots",
    "prediction", "run_comparison", "snapshot", "step_plots", "summary", "updates", "windows",
]  # fmt: skip
