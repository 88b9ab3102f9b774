"""Where the folder `shared/` beside a checkout of this repository lies, and the paper authors'
run in it, on any machine.

    shared_dir()   -> $ASSIGN_ADD_SHARED, else <repository>/../shared
    authors_dir()  -> $AUTHORS_DIR, else shared_dir() / "authors"

The repository is the folder that holds the `empirical` package. Nothing here checks that the
folders exist: callers decide what their absence means (`reproduce` skips the stage with a
note, tests skip with `where_to_point()` as the reason).
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_ENV = "ASSIGN_ADD_SHARED"
AUTHORS_ENV = "AUTHORS_DIR"


def repo_root() -> Path:
    """The repository: the parent of the `empirical` package folder."""
    return Path(__file__).resolve().parents[2]


def _from_env(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def shared_dir() -> Path:
    """The shared folder: $ASSIGN_ADD_SHARED where set, else `shared` beside the repository."""
    return _from_env(SHARED_ENV) or repo_root().parent / "shared"


def authors_dir() -> Path:
    """The paper authors' release (checkpoints/, train_pairs.json, README.md): $AUTHORS_DIR
    where set, else shared_dir() / "authors"."""
    return _from_env(AUTHORS_ENV) or shared_dir() / "authors"


def authors_checkpoints() -> Path:
    """The folder of the authors' checkpoint_step_N.pth files."""
    return authors_dir() / "checkpoints"


def where_to_point(path: Path) -> str:
    """A note for a missing `path`: where it was looked for and how to point elsewhere."""
    return (
        f"looked for {path} (not found); set {AUTHORS_ENV}=DIR (the authors' folder) or "
        f"{SHARED_ENV}=DIR (the folder holding authors/ and spec/) to point elsewhere"
    )
