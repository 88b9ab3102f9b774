"""Every file under docs/results records the command and the commit that wrote it (issue #45,
item 5): either its directory has an entry in docs/results/provenance.json, or a JSON file
beside it carries its own `provenance`; every commit named there exists in this repository.
The cheapest of them, the race's `baseline` configuration, is regenerated and compared (slow)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
INDEX = RESULTS / "provenance.json"


def _own_records() -> dict[Path, dict]:
    """{directory: provenance} of the JSON files under docs/results that carry their own."""
    out = {}
    for path in RESULTS.rglob("*.json"):
        if path == INDEX:
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        record = data.get("provenance") if isinstance(data, dict) else None
        if isinstance(record, dict):
            out[path.parent] = record
    return out


def _indexed() -> dict[Path, dict]:
    entries = json.loads(INDEX.read_text())["entries"]
    return {RESULTS / name: entry for name, entry in entries.items()}


def test_every_result_file_records_its_command_and_commit():
    indexed, own = _indexed(), _own_records()
    uncovered = []
    for path in RESULTS.rglob("*"):
        if path.is_dir() or path == INDEX:
            continue
        dirs = [path.parent, *path.parent.parents]
        if not any(d in indexed or d in own for d in dirs if d.is_relative_to(RESULTS)):
            uncovered.append(str(path.relative_to(ROOT)))
    assert not uncovered, f"no provenance for: {uncovered}"
    for where, entry in [*indexed.items(), *own.items()]:
        assert entry.get("command"), where
        assert entry.get("committed_in") or entry.get("commit"), where
        assert where.is_dir(), f"{where} is indexed but absent"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")  # fmt: skip
def test_every_commit_named_exists():
    commits = set()
    for entry in [*_indexed().values(), *_own_records().values()]:
        for key in ("committed_in", "code_commit", "commit"):
            if entry.get(key):
                commits.add(entry[key].split("+")[0])
    query = "".join(f"{c}^{{commit}}\n" for c in sorted(commits))
    done = subprocess.run(["git", "cat-file", "--batch-check"], cwd=ROOT, input=query,
                          capture_output=True, text=True)  # fmt: skip
    missing = [line for line in done.stdout.splitlines() if line.endswith("missing")]
    assert not missing, missing
