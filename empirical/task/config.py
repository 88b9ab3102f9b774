"""`TaskConfig`: the task config, one class per family chosen by its `family` field.

    task = task_config(p=11, K=3)                     # an AssignAddTask (the default family)
    task = task_config(family="chain", chain_hops=[1, 2, 3], K=8, L=24)   # a ChainTask
    task: TaskConfig = field(default_factory=task_config)     # a config class's task field

`TaskConfig` is the union of the registered families' config classes (`Family.config`:
empirical.task.assign_add.config.AssignAddTask, ...chain.config.ChainTask,
...lego.config.LegoTask), each holding the fields its family reads, validated on construction.
A table chooses its class by `family` (none: the default family, as every config written
before the families). Errors are one line naming the field: an unknown family names the
allowed ones; a field of another family names that family (with its default it says nothing
and is dropped: a table may carry the fields of the default family, as the run config's
defaults do, or a lego run saved when every task held every field). The seed is not part of
it: functions take `seed`. Importing this module imports no torch.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError

from empirical.config.io import ConfigError
from empirical.task.family import same_value
from empirical.task.registry import DEFAULT_FAMILY, all_families, family

__all__ = ["TASK_CLASSES", "TaskConfig", "task_config"]

TASK_CLASSES = tuple(f.config for f in all_families())


def task_config(**fields: Any):
    """The task config of `fields` (a TOML table's values): its family's class (`family`,
    default the default family's), validated; a ConfigError names the field."""
    chosen = family(fields.get("family", DEFAULT_FAMILY)).config
    own = chosen.__pydantic_fields__
    kept = {}
    for name, value in fields.items():
        if name in own:
            kept[name] = value
        elif not _says_nothing(name, value, chosen):
            kept[name] = value  # an unknown field: the class names it, with a did-you-mean
    return chosen(**kept)


def _says_nothing(name: str, value: Any, chosen: type) -> bool:
    """Whether `name` is another family's field at its default (True), or unknown to every
    family (False); a ConfigError if it is another family's field with a value of its own."""
    owners = [c for c in TASK_CLASSES if name in c.__pydantic_fields__]
    if not owners:
        return False
    field = owners[0].__pydantic_fields__[name]
    try:  # the value as that family would hold it ("1,2" -> (1, 2))
        value = TypeAdapter(field.rebuild_annotation()).validate_python(value)
    except ValidationError:
        pass
    if same_value(value, field.get_default(call_default_factory=True)):
        return True
    mine = chosen.__pydantic_fields__["family"].default
    if len(owners) == 1:
        owner = owners[0].__pydantic_fields__["family"].default
        raise ConfigError(
            f"task.{name} = {value!r} is a setting of the {owner} family: set task.family = "
            f"{owner!r} to use it, or leave it unset (task.family = {mine!r})"
        )
    raise ConfigError(
        f"task.{name} = {value!r} is not read by the {mine} family (task.family = {mine!r}): "
        "leave it unset"
    )


def _chosen(value: Any) -> Any:
    """A task table (a dict) as its family's config; a config as it is."""
    if isinstance(value, TASK_CLASSES):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"task: expected a table of fields, got {value!r}")
    return task_config(**value)


TaskConfig = Annotated[
    Union[TASK_CLASSES],  # noqa: UP007 (a tuple of classes: no `|` spelling)
    Field(discriminator="family"),
    BeforeValidator(_chosen),
]
