"""Theorem C.1's predicted layer-2 key-query update against trained checkpoints.

    from empirical.bridge.compare_qk.run_comparison import compare_run

    from empirical.bridge.compare_qk.outputs import write_outputs

    from empirical.bridge.compare_qk.options import Options
    result = compare_run("runs/paper/seed0", Options(steps=[1000, 2000]))
    write_outputs(result, "runs/paper/seed0/compare_qk")

Modules: coords, frames, prediction, observe, updates, metrics, options, snapshot, one_step,
windows, follow, run_comparison, summary, outputs, plots, step_plots (docs/compare_qk.md).
The public names are imported on first use (disentangled.lazy_exports)."""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "DEFAULT_FRAME",
    "FRAMES",
    "Coordinates",
    "Frames",
    "Options",
    "ab_from_beta",
    "analyse_snapshot",
    "barv_block",
    "beta_from_ab",
    "compare_run",
    "coordinates",
    "cosine",
    "g1_block",
    "gradients",
    "identity_score",
    "layer1",
    "layer2",
    "lowdin",
    "one_step_experiment",
    "one_var_batch",
    "theorem_w",
    "set_qk",
    "sign_agreement",
    "subblock_cosines",
    "summary_markdown",
    "write_outputs",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.bridge.compare_qk.coords": [
            "Coordinates",
            "coordinates",
            "lowdin",
            "set_qk",
            "theorem_w",
        ],
        "empirical.bridge.compare_qk.frames": ["Frames"],
        "empirical.bridge.compare_qk.metrics": [
            "barv_block",
            "cosine",
            "identity_score",
            "sign_agreement",
            "subblock_cosines",
        ],
        "empirical.bridge.compare_qk.observe": ["gradients", "layer1", "layer2", "one_var_batch"],
        "empirical.bridge.compare_qk.one_step": ["one_step_experiment"],
        "empirical.bridge.compare_qk.options": ["DEFAULT_FRAME", "FRAMES", "Options"],
        "empirical.bridge.compare_qk.outputs": ["write_outputs"],
        "empirical.bridge.compare_qk.prediction": ["ab_from_beta", "beta_from_ab", "g1_block"],
        "empirical.bridge.compare_qk.run_comparison": ["compare_run"],
        "empirical.bridge.compare_qk.snapshot": ["analyse_snapshot"],
        "empirical.bridge.compare_qk.summary": ["summary_markdown"],
    },
)
