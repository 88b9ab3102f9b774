"""The shape of the library (issue #37, item 5): no file of empirical/ over 500 lines, no
function over 80 lines outside data tables, and no import circles between the modules of
theory/, disentangled/ and empirical/ (imports inside functions count too: a circle closed by a
deferred import is still a circle; imports only for type checkers do not).

Each check names what breaks it, so that a new module or function that grows too long fails
here with its place and its size."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "disentangled", "empirical")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the three packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_data_table(node: ast.FunctionDef) -> bool:
    """A function whose body is one return of a literal (a table written as code)."""
    body = [n for n in node.body if not isinstance(n, ast.Expr)]  # docstring aside
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, (ast.Dict, ast.List, ast.Tuple))
    )


def test_no_file_of_empirical_is_over_500_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for name, p in MODULES.items()
        if name.startswith("empirical") and (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_function_is_over_80_lines():
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES and not _is_data_table(node):
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = size
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _imported(path: Path, name: str) -> set[str]:
    """The modules of ours that module `name` (file `path`) imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    typing_only = {  # imports under `if TYPE_CHECKING:` never run
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = {name: _imported(path, name) for name, path in MODULES.items()}
    # a package's __init__ importing its own submodules is how a package exports: not a circle
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    circles = _circles(graph)
    assert not circles, f"import circles: {circles}"


def test_no_module_is_ignored_by_git_or_by_ruff():
    """A pattern meant for the top-level runs/ once also matched empirical/runs/: a new module
    there would not have been committed, and ruff skipped the package."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [str(p.relative_to(ROOT)) for p in MODULES.values()]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, text=True,
        input="\n".join(paths), capture_output=True,
    ).stdout.split()  # fmt: skip
    assert ignored == [], f"git ignores {ignored[:5]}"
    ruff = shutil.which("ruff")
    if ruff:
        listed = subprocess.run(
            [ruff, "check", "--show-files", *PACKAGES], cwd=ROOT, text=True, capture_output=True
        ).stdout
        checked = {Path(line).resolve() for line in listed.split()}
        skipped = [p for p in paths if (ROOT / p).resolve() not in checked]
        assert skipped == [], f"ruff skips {skipped[:5]}"


# what an import inside a function may still buy (issue #44, item 3): an optional dependency,
# or torch kept out of what the command line reads before it parses (configs, families'
# names, figures' backend); the dispatcher imports each command's modules by name
MAX_DEFERRED_IMPORTS = 25


def _deferred_imports(path: Path) -> list[str]:
    """`file:line import ...` of each import statement inside a function of `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            imports = [s for s in ast.walk(node) if isinstance(s, (ast.Import, ast.ImportFrom))]
            found += [f"{path.name}:{s.lineno} {ast.unparse(s)}" for s in imports]
    return found


def test_imports_are_at_the_top_of_modules():
    deferred = [d for path in sorted((ROOT / "empirical").rglob("*.py"))
                for d in _deferred_imports(path)]  # fmt: skip
    assert len(deferred) <= MAX_DEFERRED_IMPORTS, "\n".join(deferred)


def test_no_module_is_imported_lazily_by_attribute():
    """No module-level `__getattr__` (lazy re-exports) but the package's public entry point."""
    lazy = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "empirical").rglob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    ]
    assert lazy == ["empirical/__init__.py"], lazy


def test_every_parser_is_built_from_an_options_class():
    """`add_argument` is called in one place: empirical.config.options builds every parser."""
    calls = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "empirical").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"
    ]
    assert {c.split(":")[0] for c in calls} == {"empirical/config/options.py"}, calls


def test_the_shape_checks_can_fail(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import sys\n\n\ndef f():\n    import os\n    return os, sys\n")
    assert _deferred_imports(module) == ["m.py:5 import os"]
