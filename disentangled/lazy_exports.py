"""Lazy package exports: a package's public names are imported from their modules on first
use, so that importing the package (or any light module in it, such as a config) does not
import torch.

    # in a package's __init__.py
    __all__ = ["Basis", "SimConfig"]
    __getattr__, __dir__ = lazy_exports(__name__, {
        "disentangled.basis": ["Basis"],
        "disentangled.config": ["SimConfig"],
    })

`from package import Name`, `package.Name` and `from package import *` work as with eager
imports; the first use imports the one module that defines the name and caches the value on
the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(
    package: str, modules: dict[str, list[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for the package called `package`, where `modules` maps a
    module's full name to the public names it defines."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
