"""Typed configs and command lines: pydantic dataclasses read from TOML with dotted command-line
overrides (`io`: loading, saving, errors that name the field; `field_types`: the fields'
checks), a command's options declared once as a class its parser is built from (`options`),
the option groups several commands share (`output_options`), and where ../shared lies
(`paths`). The error contract of every command is disentangled.command_line's. The configs
themselves live with what they configure: TaskConfig in empirical.task.config, ModelConfig in
empirical.model.config, RunConfig in empirical.runs.config. See docs/training.md."""

__all__ = ["field_types", "io", "options", "output_options", "paths"]
