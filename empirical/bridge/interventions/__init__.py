"""Continuations from a checkpoint under interventions (issue #36; docs/attribution.md)."""

from empirical.bridge.interventions.run_interventions import InterventionOptions, intervene

__all__ = ["InterventionOptions", "intervene"]
