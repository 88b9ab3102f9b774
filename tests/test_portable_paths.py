"""No file of the repository names a path of one particular machine: code, tests, benchmarks,
scripts and docs find `../shared/` through empirical.config.paths (or say `../shared/...`),
and example outputs go to `runs/...`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from empirical.config import paths as shared_paths

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt"}
# an absolute path under a machine's work, home or root folder, or the old GPU scratch folder;
# the lookbehind keeps relative paths such as runs/work/ or ../home/ out (written in pieces
# so that this file does not match itself)
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:" + "wo" + "rk|ho" + "me|ro" + "ot)/|/tmp/gpu" + "_work"
)


def repository_files() -> list[Path]:
    """Tracked files and untracked ones git does not ignore (new files count too)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no file list to check")
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in out.split("\0") if name and Path(name).suffix in SUFFIXES]


def machine_paths(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):  # deleted in the worktree; binary
        return []
    rel = path.relative_to(ROOT)
    return [
        f"{rel}:{n}: {line.strip()[:120]}"
        for n, line in enumerate(text.splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]


def test_no_file_names_a_path_of_one_machine():
    files = repository_files()
    assert len(files) > 100  # the list is the repository's, not an empty one
    bad = [hit for path in files for hit in machine_paths(path)]
    how = "use empirical.config.paths, ../shared/... or runs/..."
    assert not bad, f"absolute paths of one machine ({how}):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "line",
    [
        "see " + "/wo" + "rk/shared/x.md",
        "cd /ho" + "me/u/x",
        "W=/tmp/gpu" + "_work",
        "`/ro" + "ot/a`",
    ],
)
def test_the_check_can_fail(line):
    assert MACHINE_PATH.search(line)


@pytest.mark.parametrize("line", ["../shared/authors/x", "runs/work/x", "a/home/b", "/tmp/cq_x"])
def test_relative_paths_pass(line):
    assert not MACHINE_PATH.search(line)


def test_the_locator_follows_the_repository_and_the_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv(shared_paths.SHARED_ENV, raising=False)
    monkeypatch.delenv(shared_paths.AUTHORS_ENV, raising=False)
    assert shared_paths.repo_root() == ROOT
    assert shared_paths.shared_dir() == ROOT.parent / "shared"
    assert shared_paths.authors_dir() == ROOT.parent / "shared" / "authors"
    monkeypatch.setenv(shared_paths.SHARED_ENV, str(tmp_path / "s"))
    assert shared_paths.authors_checkpoints() == tmp_path / "s" / "authors" / "checkpoints"
    monkeypatch.setenv(shared_paths.AUTHORS_ENV, str(tmp_path / "a"))
    assert shared_paths.authors_dir() == tmp_path / "a"
    note = shared_paths.where_to_point(tmp_path / "a")
    assert str(tmp_path / "a") in note and "AUTHORS_DIR" in note and "ASSIGN_ADD_SHARED" in note
