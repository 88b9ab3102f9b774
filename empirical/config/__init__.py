"""The typed run config: pydantic dataclasses read from TOML with dotted command-line overrides
(`io`: loading, saving, errors that name the field; `field_types`: the fields' checks; `run`:
RunConfig and TrainConfig). The task's fields are collected from the task families
(empirical.task.config) and the model's are in empirical.model.config. See docs/training.md."""

__all__ = ["field_types", "io", "run"]
