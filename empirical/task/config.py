"""`TaskConfig`: the task config, the union of the families' config classes (`Family.config`:
AssignAddTask, ChainTask, LegoTask, each the fields its family reads), chosen by `family`.

    task = task_config(p=11, K=3)                       # an AssignAddTask (the default family)
    task = task_config(family="chain", K=8, L=24, chain_hops=[1, 2, 3])     # a ChainTask
    task: TaskConfig = field(default_factory=task_config)   # a config class's task table

A table without `family` is the default family's (every config written before the families).
Errors are one line naming the field: an unknown family lists the allowed ones; another
family's field names that family, unless it has its default (then it says nothing and is
dropped: the run config's defaults, or a lego run saved when every task held every field).
No torch here.
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
    own = chosen.__pydantic_fields__  # (a field unknown to every family: the class names it)
    return chosen(**{k: v for k, v in fields.items() if k in own or not _ignored(k, v, chosen)})


def _ignored(name: str, value: Any, chosen: type) -> bool:
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
