"""The size of each package (issue #44, item 7: empirical/ <= 18 000 code lines): lines of
every .py file, split into code, docstrings, comments and blank lines, and the files.

    python benchmarks/bench_size.py            # a table; --json for the numbers
"""

from __future__ import annotations

import argparse
import ast
import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("empirical", "disentangled", "theory")
GOAL = {"empirical": 18_000}  # code lines


def _docstring_lines(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            value = getattr(first, "value", None)
            if isinstance(first, ast.Expr) and isinstance(value, ast.Constant):
                if isinstance(value.value, str):
                    out.update(range(first.lineno, first.end_lineno + 1))
    return out


def file_lines(path: Path) -> Counter:
    text = path.read_text()
    doc = _docstring_lines(ast.parse(text))
    counts: Counter = Counter()
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        kind = "docstring" if n in doc else "blank" if not stripped else (
            "comment" if stripped.startswith("#") else "code")  # fmt: skip
        counts[kind] += 1
    return counts


def package_size(name: str) -> dict:
    files = sorted((ROOT / name).rglob("*.py"))
    total: Counter = Counter()
    for f in files:
        total += file_lines(f)
    return {"package": name, "files": len(files), "lines": sum(total.values()),
            **{k: total[k] for k in ("code", "docstring", "comment", "blank")},
            "goal": GOAL.get(name)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    rows = [package_size(p) for p in PACKAGES]
    if ap.parse_args().json:
        print(json.dumps(rows, indent=2))
        return
    print("| package | files | lines | code | docstrings | comments | blank | goal |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        goal = f"code <= {r['goal']}" if r["goal"] else ""
        print(f"| {r['package']} | {r['files']} | {r['lines']} | {r['code']} | {r['docstring']} "
              f"| {r['comment']} | {r['blank']} | {goal} |")  # fmt: skip


if __name__ == "__main__":
    main()
