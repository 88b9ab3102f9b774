"""Continuations from a checkpoint under interventions (issue #36; docs/attribution.md):
`conditions` (what each condition changes in the training), `options` (InterventionOptions,
and the command's InterveneOptions), `continuations` (the members trained as one batch),
`run_interventions` (`intervene`: one run from one checkpoint end to end), `outputs` (the
statistics and the files)."""

__all__ = ["conditions", "continuations", "options", "outputs", "run_interventions"]
