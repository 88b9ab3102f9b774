"""What drives a window of a run, split by parameter group (issue #36; docs/attribution.md)."""

from empirical.bridge.attribution.run_attribution import AttributionOptions, attribute_window

__all__ = ["AttributionOptions", "attribute_window"]
