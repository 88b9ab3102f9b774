"""README's first section ("The first five minutes"), run as written (slow: about 5 minutes):
every `python -m ...` command of its bash blocks (the install line is what CI itself ran) in a
scratch directory laid out like a checkout (configs/ and ../shared/ beside it), then its
Python block, whose `# 36 = ...` answer is checked; and what the section states of the quick
run (first phase learned, second not) is checked against the run's summary.json."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from empirical.config.paths import shared_dir

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## The first five minutes"


def section_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    body = text[start : end if end > 0 else None]
    return re.findall(r"^```(bash|python)\n(.*?)^```", body, re.S | re.M)


def commands(blocks) -> list[list[str]]:
    out = []
    for kind, code in blocks:
        if kind != "bash":
            continue
        for line in code.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("python -m "):
                out.append([sys.executable, *shlex.split(line)[1:]])
    return out


def test_the_section_has_its_commands():
    blocks = section_blocks()
    cmds = commands(blocks)
    assert [c[3] for c in cmds[:4]] == ["train", "evaluate", "analyze", "compare-qk"], cmds
    assert any(kind == "python" for kind, _ in blocks)


@pytest.mark.slow
def test_the_first_five_minutes_as_written(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "configs").symlink_to(ROOT / "configs")
    shared = shared_dir()
    has_shared = (shared / "authors" / "checkpoints").is_dir()
    if has_shared:
        (tmp_path / "shared").symlink_to(shared)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop("ASSIGN_ADD_SHARED", None)
    blocks = section_blocks()
    for cmd in commands(blocks):
        line = " ".join(cmd)
        if ("../shared" in line or "runs/authors" in line) and not has_shared:
            continue  # the paper's checkpoints are not beside this checkout: no runs/authors
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
    run = work / "runs" / "quick"
    assert (run / "analysis" / "summary.md").is_file()
    assert list((run / "analysis").glob("*.png"))
    assert list((run / "compare_qk").glob("*")), "compare-qk wrote nothing"
    # the Python block, as written: its printed answer is the one its comment states
    code = next(code for kind, code in blocks if kind == "python")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "36", done.stdout
    # what the section says the quick run learns: the first phase, not the second
    final = json.loads((run / "summary.json").read_text())["final_acc"]
    for name in ("0var/ind", "0var/pair", "1var/ind", "1var/pair"):
        assert final[name] >= 0.99, (name, final)
    assert final["1var/var"] < 0.9 and final["2var/var"] < 0.9, final
