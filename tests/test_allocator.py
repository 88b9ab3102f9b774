"""empirical.train.allocator: the commands it speeds up (train, sweep, grid, compare-qk, reproduce)
and reproduce's background processes keep freed memory (glibc's mmap and trim thresholds
raised), no other command does, an environment variable turns it off, and it changes no
number (the same weights after training steps of the authors' batch size). Each check that
applies it runs in a fresh process: the test process's own allocator is left as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from malloc_probe import GLIBC

ROOT = Path(__file__).resolve().parents[1]


def in_fresh_process(code: str, keep: str | None = None) -> str:
    env = dict(os.environ)
    env.pop("ASSIGN_ADD_KEEP_FREED_MEMORY", None)
    if keep is not None:
        env["ASSIGN_ADD_KEEP_FREED_MEMORY"] = keep
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


# whether it says it applied, and whether a 64 MiB block is then still mmapped on its own
APPLIED = """
import sys
sys.path.insert(0, "tests")
from malloc_probe import large_block_mapped
from empirical.train.allocator import retain_freed_memory
print(large_block_mapped(), retain_freed_memory(), large_block_mapped())
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt: Linux with glibc only")
def test_retained_on_glibc_unless_turned_off():
    mapped, applied, mapped_after = in_fresh_process(APPLIED).split()
    assert applied == "True"
    assert (mapped, mapped_after) == ("True", "False")  # from the heap once applied
    mapped, applied, mapped_after = in_fresh_process(APPLIED, keep="0").split()
    assert applied == "False"
    assert (mapped, mapped_after) == ("True", "True")


def test_importing_the_library_leaves_the_allocator_alone():
    import empirical.train.allocator as allocator

    source = Path(allocator.__file__).read_text()
    body = source.split("def retain_freed_memory")[0]
    assert "mallopt(" not in body  # only the function calls it, never the import
    # (that importing every module leaves glibc's allocator as it was is observed by
    # tests/test_figures.py's import-everything check, with tests/malloc_probe.py)


def test_only_the_commands_it_speeds_up_keep_freed_memory(monkeypatch, capsys):
    """`python -m empirical COMMAND` sets it before the command runs for the commands whose
    work benchmarks/bench_allocator.py shows it speeds up, and for no other."""
    import empirical.__main__ as entry

    applied: list[str] = []
    monkeypatch.setattr("empirical.report.figures.use_cli_backend", lambda: None)
    monkeypatch.setattr(
        "empirical.train.allocator.retain_freed_memory", lambda: applied.append(command) or True
    )
    for command in entry.COMMANDS:
        with pytest.raises(SystemExit) as done:  # each command's --help ends it
            entry._dispatch([command, "--help"])
        assert done.value.code == 0
    assert set(applied) == {"train", "sweep", "grid", "compare-qk", "reproduce"}
    assert set(applied) == entry.KEEP_FREED_MEMORY


TRAIN = """
import hashlib, sys
sys.path.insert(0, "benchmarks")
from empirical.train.allocator import retain_freed_memory
print(retain_freed_memory())
from bench_threads import stream_of, weights_after
from empirical.runs.config import load_run_config
cfg = load_run_config("configs/authors.toml", ["train.device=cpu"])
stream = stream_of(cfg)
weights = weights_after(cfg, [stream.next() for _ in range(40)], threads=1)
digest = hashlib.sha256()
for _, v in sorted(weights.items()):
    digest.update(v.detach().numpy().tobytes())
print(digest.hexdigest())
"""


@pytest.mark.slow  # two fresh processes that train 40 steps at batch 512 (15 s)
@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt: Linux with glibc only")
def test_training_gives_the_same_weights_with_freed_memory_kept():
    kept = in_fresh_process(TRAIN)
    default = in_fresh_process(TRAIN, keep="0")
    assert kept == default
