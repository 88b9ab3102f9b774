"""Where a result came from: the command that wrote it, the commit of the code it ran (git),
torch's version and the CPU kind. Every file under docs/results records these
(docs/results/provenance.json for the files written before results carried them; a result
written since carries its own `provenance`).

    provenance("python -m empirical race --out runs/race")
    # {"command": ..., "commit": "eedce5b...(+dirty)", "torch": "2.13.0+cpu", "cpu": "AMD EPYC ..."}
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def repository_commit(root: str | Path | None = None) -> str | None:
    """The git commit of this checkout ('+dirty' when tracked files differ from it; None: not
    a git checkout, or git is absent)."""
    cwd = Path(root) if root is not None else REPO
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10)  # fmt: skip
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def torch_version() -> str | None:
    """torch's version, as installed (read without importing torch)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - torch is a dependency
        return None


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it ("AMD EPYC", "Intel(R) Xeon(R) ..."):
    float32 training rounds differently on different CPU kinds, so a run records which;
    the architecture where the file is missing (not Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(command: str) -> dict:
    """{"command", "commit", "torch", "cpu"} of a result this process writes."""
    return {"command": command, "commit": repository_commit(), "torch": torch_version(),
            "cpu": cpu_model()}  # fmt: skip
