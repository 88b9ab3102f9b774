"""Figures of the analysis, each titled, with labelled axes and legends: every function returns
the matplotlib Figure and, given a `path`, writes it (empirical.report.figures.save_figure).
Modules: `mechanism` (Figures 4, 5, 5a, 11, probes), `qk_scores` (Figures 6, 7a, 7b),
`over_training` (Figures 9, 12), `spike_steps` (Figures 8, 9c, 9d), `style` (what they share).
"""

from empirical.analysis.plots.mechanism import (
    plot_attention_examples,
    plot_fourier_neuron,
    plot_fourier_spectrum,
    plot_ov_mlp_cosine,
    plot_probes_and_circuit,
)
from empirical.analysis.plots.over_training import plot_progress, plot_second_spike
from empirical.analysis.plots.qk_scores import (
    plot_qk1_embeddings,
    plot_qk1_positional,
    plot_qk2_identity,
)
from empirical.analysis.plots.spike_steps import (
    plot_first_spike_comparison,
    plot_second_spike_comparison,
)

__all__ = [
    "plot_attention_examples",
    "plot_first_spike_comparison",
    "plot_fourier_neuron",
    "plot_fourier_spectrum",
    "plot_ov_mlp_cosine",
    "plot_probes_and_circuit",
    "plot_progress",
    "plot_qk1_embeddings",
    "plot_qk1_positional",
    "plot_qk2_identity",
    "plot_second_spike",
    "plot_second_spike_comparison",
]
