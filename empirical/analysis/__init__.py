"""Mechanistic analysis of a trained assign-and-add model (paper Sections 5-6, Appendix B):
each analysis a plain function of a loaded model and the task config, in a module per kind
of mechanism; import them from their modules.

    from empirical.analysis.probe_data import make_probe_data
    from empirical.analysis.ov_mlp import isolated_ov_mlp
    data = make_probe_data(task, seed=0)                  # fixed probe sequences, built once
    isolated_ov_mlp(model, task)                          # exact OV-MLP subnetwork accuracy

Modules: `attention` (Figure 4), `ov_mlp` (Figures 5, 5a, the isolated OV-MLP circuit),
`probes` (answer probes before / after the MLP), `fourier` (Figure 11), `qk` (Figures 6, 7a,
7b), `progress` (the seven measures of Appendix B, one model and over a run's snapshots),
`authors` (their definitions of them, `NAME@authors`), `spikes` (Figures 8, 9c / 9d: before
and after a spike), `probe_data` (the fixed sequences they read), `reference` (the exact
circuit built by hand), `common` (what they share); `model_analysis` (every analysis of one
model, each declared once: its numbers, summary rows and figures), `run_analysis`
(`analyze_run`: all of it for a run, files under RUN_DIR/analysis), `markdown_summary`
(summary.md), `options` (what `analyze_run` varies), `plots` (the figures); `codes` (multi-head
attention's latent codes at `=`, the `codes` command, docs/heads.md). Every definition:
docs/analysis.md. Importing this package imports nothing.
"""

__all__ = [
    "attention", "authors", "codes", "common", "fourier", "markdown_summary", "model_analysis",
    "options", "ov_mlp", "plots", "probe_data", "probes", "progress", "qk", "reference",
    "run_analysis", "spikes",
]  # fmt: skip
