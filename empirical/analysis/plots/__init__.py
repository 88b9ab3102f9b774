"""Figures of the analysis, each titled, with labelled axes and legends: every function returns
the matplotlib Figure and, given a `path`, writes it (empirical.report.figures.save_figure).
Modules: `mechanism` (Figures 4, 5, 5a, 11, probes), `qk_scores` (Figures 6, 7a, 7b),
`over_training` (Figures 9, 12), `spike_steps` (Figures 8, 9c, 9d); what they share is
empirical.report.style. Importing this package imports nothing.
"""

__all__ = ["mechanism", "over_training", "qk_scores", "spike_steps"]
