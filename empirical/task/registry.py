"""The registry of task families: `task.family` -> the family (empirical.task.family.Family).

    from empirical.task.registry import family_of
    family = family_of(cfg.task)          # e.g. the chain family of a chain run's task
    sampler = family.training_sampler(cfg.task, family.held_out(cfg.task, seed), "cpu")

The one place that lists the families (a test greps for it): a new family is one package
under empirical/task/ whose `__init__` defines FAMILY (and its config class), and one entry in
FAMILIES. Importing this module imports no torch.
"""

from __future__ import annotations

from empirical.config.io import ConfigError
from empirical.task import assign_add, chain, graph, lego
from empirical.task.family import Family

__all__ = [
    "DEFAULT_FAMILY", "FAMILIES", "Family", "all_families", "family", "family_names",
    "family_of", "panel_of", "panel_title", "set_label",
]  # fmt: skip

# name -> the family; the first is the default (a task table without `family`)
FAMILIES: dict[str, Family] = {
    f.name: f for f in (assign_add.FAMILY, chain.FAMILY, lego.FAMILY, graph.FAMILY)
}
DEFAULT_FAMILY = next(iter(FAMILIES))


def family_names() -> tuple[str, ...]:
    return tuple(FAMILIES)


def family(name: str) -> Family:
    """The family called `name`; a ConfigError naming task.family and the allowed names."""
    if not isinstance(name, str) or name not in FAMILIES:
        raise ConfigError(
            f"task.family = {name!r} is not allowed: must be one of "
            + ", ".join(repr(n) for n in FAMILIES)
        )
    return FAMILIES[name]


def family_of(task) -> Family:
    """The family of a task config (its `family` field)."""
    return family(task.family)


def all_families() -> list[Family]:
    return list(FAMILIES.values())


def _owner(set_name: str) -> Family | None:
    return next((f for f in all_families() if f.owns_set(set_name)), None)


def set_label(set_name: str) -> str | None:
    """The plain-language name of an evaluation set (None: none), from its family."""
    owner = _owner(set_name)
    return None if owner is None else owner.set_label(set_name)


def panel_of(set_name: str) -> str:
    """The Figure 2 panel of an evaluation set: its family's choice, else its prefix."""
    owner = _owner(set_name)
    return owner.panel(set_name) if owner is not None else set_name.partition("/")[0]


def panel_title(key: str) -> str:
    """A panel's title (the first family that names it; else the key itself)."""
    return next((f.panel_titles[key] for f in all_families() if key in f.panel_titles), key)
