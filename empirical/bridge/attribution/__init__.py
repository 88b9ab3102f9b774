"""What drives a window of a run, split by parameter group (issue #36; docs/attribution.md):
`options` (AttributionOptions, and the command's AttributeOptions), `targets` (the losses and
scores whose changes are split), `replay` (the training replayed from a checkpoint), `paths`
(the path integrals), `against_theory` and `first_order` (each group's change against its
first-order prediction), `run_attribution` (`attribute_window`: one window end to end),
`outputs` (its files and figures)."""

__all__ = [
    "against_theory", "first_order", "options", "outputs", "paths", "replay", "run_attribution",
    "targets",
]  # fmt: skip
