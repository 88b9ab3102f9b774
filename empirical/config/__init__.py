"""Typed configs and command lines: pydantic dataclasses read from TOML with dotted command-line
overrides (`io`: loading, saving, errors that name the field; `field_types`: the fields'
checks), a command's options declared once as a class its parser is built from (`options`),
the older parser helpers and error contract (`command_line`), and where ../shared lies
(`paths`). The configs themselves live with what they configure: TaskConfig in
empirical.task.config, ModelConfig in empirical.model.config, RunConfig in
empirical.runs.config. See docs/training.md."""

__all__ = ["command_line", "field_types", "io", "options", "paths"]
