"""Task families behind one interface (empirical.task.registry): nothing outside the registry,
the family packages (empirical/task/<family>/) and what they add on top (empirical/studies/)
asks which family it runs, and every registered family offers the whole
interface on its default-sized config."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from empirical.studies.registry import ANALYSES, COMMANDS
from empirical.task.registry import all_families, family, family_names, family_of

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
    defaults = fam.field_defaults()
    assert all(field.startswith(f"{name}_") for field in defaults), defaults


def test_the_registry_answers_an_unknown_family_with_the_allowed_names():
    from empirical.config.io import ConfigError
    from empirical.task import TaskConfig

    with pytest.raises(ConfigError, match="task.family = 'nope' is not allowed: must be one of"):
        TaskConfig(family="nope")
    assert family_of(TaskConfig()).name == "assign_add"
