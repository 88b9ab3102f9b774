"""The folders are the layers: every folder of empirical/ sits in one layer and imports only from
the folders below it (function-level imports included), so nothing runs back up the layers
(e.g. a library module importing a command). docs/architecture.md draws the same picture."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# lowest first: one entry per folder of empirical/ (and the two other packages below them)
LAYERS = [
    "disentangled",  # the theorem's model, exactly; the error contract of every command
    "theory",  # Theorem C.1 derived with sympy
    "empirical.report",  # what every output shares: files, figures, tables, statistics
    "empirical.config",  # typed configs and command lines: TOML, overrides, errors
    "empirical.task",  # the task: its families (fields, vocabulary, sampler, eval sets), TaskConfig
    "empirical.model",  # ModelConfig and the one forward, hooked; checkpoints
    "empirical.runs",  # a run as data: RunConfig, its directory, metrics, phases
    "empirical.train",  # producing runs: the training loop, evaluation, import, repair
    "empirical.analysis",  # mechanisms and progress measures of one model
    "empirical.bridge",  # theory against trained models
    "empirical.experiments",  # many runs: sweeps, grids, populations, the main job
    "empirical.studies",  # what a task family adds on top: its analyses and commands
    "empirical.cli",  # the commands
]
LEVEL = {unit: i for i, unit in enumerate(LAYERS)}
PACKAGES = ("disentangled", "theory", "empirical")
# the package's entry points may reach any layer: `python -m empirical` (the dispatcher) and
# `import empirical` (the public names)
ENTRY_POINTS = ("empirical", "empirical.__main__")


def unit_of(module: str) -> str | None:
    """The layer entry a dotted module name falls in (None: not one of ours)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] != "empirical":
        return parts[0]
    if module in ENTRY_POINTS:
        return module
    return ".".join(parts[:2])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_every_folder_of_empirical_is_a_layer():
    folders = {p.name for p in (ROOT / "empirical").iterdir() if (p / "__init__.py").exists()}
    listed = {unit.split(".")[1] for unit in LAYERS if unit.startswith("empirical.")}
    assert folders == listed, f"folders not in LAYERS: {folders - listed}; gone: {listed - folders}"
    loose = {p.name for p in (ROOT / "empirical").glob("*.py")}
    assert loose == {"__init__.py", "__main__.py"}, f"modules outside the folders: {loose}"


def test_every_library_import_points_down():
    bad = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name.startswith("test_"):
                continue
            src = unit_of(module_name(path))
            if src in ENTRY_POINTS:
                continue
            assert src in LEVEL, f"{path}: add its folder {src!r} to LAYERS"
            for line, target in imports(path):
                dst = unit_of(target)
                if dst is None or dst == src:
                    continue
                if dst in ENTRY_POINTS or LEVEL[dst] > LEVEL[src]:
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {src} imports {target}")
    assert not bad, "imports that run back up the layers:\n" + "\n".join(bad)


def test_the_layer_check_can_fail():
    assert LEVEL["empirical.cli"] > LEVEL["empirical.experiments"] > LEVEL["empirical.train"]
    assert unit_of("empirical.runs.phases") == "empirical.runs"
    assert unit_of("empirical.analysis.fourier") == "empirical.analysis"
    assert unit_of("empirical.studies.chain.analysis.attention") == "empirical.studies"
    assert unit_of("empirical.task.chain.draw") == "empirical.task"
    assert unit_of("empirical.__main__") == "empirical.__main__"
    assert unit_of("numpy") is None
    assert LEVEL["empirical.studies"] > LEVEL["empirical.task"]
