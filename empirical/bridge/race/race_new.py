"""The race's new test set (issue #45, item 1e; docs/race.md, "The new test set"): where the
race and the tau-free rule disagree (inputs trained, no 2-var in training), at (p, K, beta)
the fit did not use, the inputs' rate spanning three orders of magnitude. Its names and the
criterion's predictions were committed before any of it was trained (git log --
empirical/bridge/race/race_new.py docs/results/race_new_predictions.json).

NEW_SET: (name, releases, dotted DynamicsConfig overrides). No torch here.
"""

from __future__ import annotations

NEW_SET: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
