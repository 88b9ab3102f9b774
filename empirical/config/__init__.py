"""The typed run config: pydantic dataclasses read from TOML with dotted command-line overrides
(`io`: loading, saving, errors that name the field; `field_types`: the fields' checks; `run`:
RunConfig and TrainConfig). The task's fields are collected from the task families
(empirical.config.task) and the model's are in empirical.config.model. See docs/training.md."""

__all__ = ["field_types", "io", "model", "run", "task"]
