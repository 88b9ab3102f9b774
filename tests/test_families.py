"""Task families behind one interface (empirical.task.registry): nothing outside the registry,
the family packages (empirical/task/<family>/) and what they add on top (empirical/studies/)
asks which family it runs, and every registered family offers the whole
interface on its default-sized config."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from empirical.studies.registry import ANALYSES, COMMANDS
from empirical.task.registry import DEFAULT_FAMILY, all_families, family, family_names, family_of

ROOT = Path(__file__).resolve().parents[1]
# where a family's name may appear: its own package, the registry, and empirical/studies
FAMILY_PLACES = [ROOT / "empirical" / "task" / name for name in family_names()] + [
    ROOT / "empirical" / "studies"
]
REGISTRY = ROOT / "empirical" / "task" / "registry.py"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def family_name_uses(source: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `source` that is a family's name or starts a
    family's set names (`chain/...`): a comparison `family == "chain"`, a dict keyed by family
    names, a set name's prefix tested. Docstrings are prose and do not count."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if text in names or text.partition("/")[0] in names and "/" in text:
                found.append((node.lineno, text))
    return found


def test_nothing_outside_the_families_branches_on_a_family_name():
    names = family_names()
    bad = []
    for path in sorted((ROOT / "empirical").rglob("*.py")):
        if path == REGISTRY or any(place in path.parents for place in FAMILY_PLACES):
            continue  # the registry, the family packages and studies/ may name themselves
        for line, text in family_name_uses(path.read_text(), names):
            bad.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not bad, "family names outside the families' packages (ask the family instead):\n" + (
        "\n".join(bad)
    )


def test_the_family_name_check_can_fail():
    names = ("assign_add", "chain")
    code = '''
"""A docstring may say task.family = "chain"."""
def f(task, name):
    """Nor here: "chain"."""
    if task.family == "chain":
        return {"assign_add": 1}
    return name.startswith("chain/")
'''
    found = sorted(family_name_uses(code, names))
    assert [text for _, text in found] == ["chain", "assign_add", "chain/"]


@pytest.mark.parametrize("name", family_names())
def test_every_family_offers_the_interface(name):
    fam = family(name)
    assert fam.name == name and fam.title and fam in all_families()
    for command, (module, help_, options) in COMMANDS.items():
        assert module.startswith("empirical.studies.") and help_, command
        assert options.startswith("empirical.studies.") and ":" in options, command
    if name in ANALYSES:
        assert ANALYSES[name].startswith(f"empirical.studies.{name}.") and ":" in ANALYSES[name]
    assert fam.config.__module__ == f"empirical.task.{name}.config"
    fields = [f.name for f in dataclasses.fields(fam.config)]
    assert next(f for f in dataclasses.fields(fam.config) if f.name == "family").default == name
    shared = {f.name for f in dataclasses.fields(family(DEFAULT_FAMILY).config)}
    own = [f for f in fields if f not in shared]
    assert all(f.startswith(f"{name}_") for f in own), own  # the others: the paper's fields


@pytest.mark.parametrize(
    "path", ["configs/paper.toml", "configs/chain.toml", "configs/lego.toml", "configs/graph.toml"]
)
def test_a_task_table_chooses_its_family_class_and_round_trips(path):
    from empirical.config.io import _omitted, to_dict
    from empirical.runs.config import load_run_config
    from empirical.task.config import task_config

    task = load_run_config(path).task
    assert type(task) is family_of(task).config
    table = to_dict(task)
    assert task_config(**table) == task
    # every field it holds (but one added after runs were saved, at its default)
    assert list(table) == [f.name for f in dataclasses.fields(task) if not _omitted(task, f)]


def test_a_table_without_family_is_the_default_family_and_may_carry_its_defaults():
    from empirical.config.io import to_dict
    from empirical.runs.config import load_run_config
    from empirical.task.config import task_config

    paper = load_run_config("configs/paper.toml").task
    table = {k: v for k, v in to_dict(paper).items() if k != "family"}
    assert task_config(**table) == paper
    lego = load_run_config("configs/lego.toml").task
    # a lego table saved when every task held every field: the paper's defaults say nothing
    old = {**to_dict(task_config()), **to_dict(lego)}
    assert "p" in old and task_config(**old) == lego


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"chain_hops": [1, 2, 3]}, "task.chain_hops = (1, 2, 3) is a setting of the chain family: "
         "set task.family = 'chain' to use it, or leave it unset (task.family = 'assign_add')"),
        ({"family": "lego", "K": 8, "L": 9, "p": 11},
         "task.p = 11 is not read by the lego family (task.family = 'lego'): leave it unset"),
        ({"family": "lego", "K": 8, "L": 9, "lego_hopz": 1},
         "unknown config field task.lego_hopz (did you mean task.lego_hops?); allowed: task.K, "
         "task.L, task.eval_size, task.family, task.lego_chain_length"),
        ({"family": 3}, "task.family = 3 is not allowed: must be one of 'assign_add', 'chain'"),
    ],
)  # fmt: skip
def test_a_field_the_family_does_not_read_is_one_line_naming_it(fields, message):
    from empirical.config.io import ConfigError, from_dict
    from empirical.runs.config import RunConfig
    from empirical.task.config import task_config

    for build in (lambda: task_config(**fields), lambda: from_dict(RunConfig, {"task": fields})):
        with pytest.raises(ConfigError) as err:
            build()
        assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match="task: expected a table of fields, got 3"):
        from_dict(RunConfig, {"task": 3})


def test_the_registry_answers_an_unknown_family_with_the_allowed_names():
    from empirical.config.io import ConfigError
    from empirical.task.config import task_config

    with pytest.raises(ConfigError, match="task.family = 'nope' is not allowed: must be one of"):
        task_config(family="nope")
    assert family_of(task_config()).name == "assign_add"
