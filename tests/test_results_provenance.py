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
            out[path.parent if path.parent != RESULTS else path] = record
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
        # an index entry covers its directory's whole tree; a JSON's own record, the files
        # beside it (and a file at the top of docs/results only itself: its name, indexed)
        tree = [d for d in [path.parent, *path.parent.parents]
                if d.is_relative_to(RESULTS) and d != RESULTS]  # fmt: skip
        top = path.parent == RESULTS
        covered = (any(d in indexed for d in tree) or (path in own if top else path.parent in own)
                   or path in indexed)  # fmt: skip
        if not covered:
            uncovered.append(str(path.relative_to(ROOT)))
    assert not uncovered, f"no provenance for: {uncovered}"
    for where, entry in [*indexed.items(), *own.items()]:
        assert entry.get("command"), where
        assert entry.get("committed_in") or entry.get("commit"), where
        assert where.exists(), f"{where} is indexed but absent"


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


@pytest.mark.slow  # three 300-step runs of the theorem's model (about a minute)
def test_the_cheapest_result_regenerates(tmp_path):
    """docs/results/race.json's `baseline` configuration (its step-0 quantities and its three
    seeds' outcomes) made again by the command race.json records, here."""
    from empirical.__main__ import main as empirical_main

    published = json.loads((RESULTS / "race.json").read_text())
    assert published["provenance"]["command"].startswith("python -m empirical race")
    row = next(c for c in published["configs"] if c["name"] == "baseline")
    out = tmp_path / "race"
    assert empirical_main(["race", "--only", "baseline", "--out", str(out), "--quiet"]) == 0
    # fitting tau needs the fit half; the baseline's own record is what is compared
    state = json.loads((out / "race_state.json").read_text())["configs"]["baseline"]
    for key in ("loss", "T_mem"):
        assert state["step_zero"][key] == pytest.approx(row["step_zero"][key], rel=1e-6)
    runs = [state["runs"][str(s)] for s in range(row["seeds"])]
    assert sum(r["composed"] for r in runs) == row["seeds_composed"]
    assert [r["emergence_step"] for r in runs] == row["emergence_steps"]
    assert [r["final"]["2var"] for r in runs] == pytest.approx(row["final_2var"], abs=1e-9)
