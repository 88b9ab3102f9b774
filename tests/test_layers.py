"""Imports point one way: no module imports a layer above its own (function-level imports
included), so nothing runs back up the layers (e.g. a library module importing the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# lowest first; a unit may import its own layer's other units only where listed as such
LAYERS = [
    ["disentangled"],
    ["theory"],
    [
        "empirical.allocator",
        "empirical.config.io",
        "empirical.config.field_types",
        "empirical.analysis.figures",
        "empirical.analysis.phase_marks",
        "empirical.analysis.phases",
        "empirical.stats",
        "empirical.runs.metrics_log",
        "empirical.experiments.paper_checks",
        "empirical.shared_paths",
        # the packages that only group their modules (their __init__ imports nothing)
        "empirical.config",
        "empirical.bridge",
        "empirical.experiments",
        "empirical.runs",
    ],
    # the task and its families (the registry, each family's fields, vocabulary, sampler and
    # evaluation sets): TaskConfig collects the families' fields, the families draw Batches
    ["empirical.task", "empirical.families", "empirical.config.task"],
    # the sets' plain names are their families'; a set's timeline names its phases
    ["empirical.analysis.plain_names", "empirical.analysis.set_timeline"],
    ["empirical.model", "empirical.config.model"],
    ["empirical.config.run"],
    ["empirical.runs.rundir"],
    ["empirical.runs.lock"],
    ["empirical.train"],
    ["empirical.runs.load"],
    [
        "empirical.experiments.sweep",
        "empirical.runs.evaluation",
        "empirical.runs.import_run",
        "empirical.runs.repair",
    ],
    ["empirical.analysis"],
    ["empirical.bridge.compare_qk"],
    ["empirical.bridge.attribution"],  # what drives a window: replay, path integrals (issue #36)
    ["empirical.families.analysis"],  # the analyses a family adds (<family>/analysis...)
    ["empirical.experiments.population"],
    ["empirical.bridge.interventions"],  # continuations under interventions (issue #36)
    ["empirical.bridge.theorem_model"],
    ["empirical.bridge.ladder", "empirical.bridge.ladder_dynamics"],
    ["empirical.bridge.race"],  # the race trains ladder configurations
    ["empirical.experiments.scheduling", "empirical.experiments.reproduce_report"],
    ["empirical.experiments.reproduce"],
    # the commands a family adds (<family>/commands/...) are commands like the others
    ["empirical.cli", "empirical.__main__", "empirical.families.commands"],
]
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
# a task family's package spans the layers: empirical.families.<name>.analysis[...] and
# .commands[...] are units of their own, the rest of the package is empirical.families
FAMILY_ROLES = ("analysis", "commands")
PACKAGES = ("disentangled", "theory", "empirical")


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] != "empirical":
        return parts[0]
    if parts[1:2] == ["families"] and len(parts) > 3 and parts[3] in FAMILY_ROLES:
        return f"empirical.families.{parts[3]}"  # a family's analyses or commands
    for n in range(len(parts), 1, -1):  # the longest listed unit that holds the module
        if (prefix := ".".join(parts[:n])) in LEVEL:
            return prefix
    return "empirical" if len(parts) == 1 else f"empirical.{parts[1]}"


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


def test_every_library_import_points_down():
    bad = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name.startswith("test_"):
                continue
            src = unit_of(module_name(path))
            if src == "empirical":  # the package's lazy entry points may reach anything
                continue
            assert src in LEVEL, f"{path}: add its unit {src!r} to LAYERS"
            for line, target in imports(path):
                dst = unit_of(target)
                if dst is None or dst == src or dst == "empirical":
                    continue
                assert dst in LEVEL, f"{path}:{line}: add {dst!r} to LAYERS"
                if LEVEL[dst] > LEVEL[src]:
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {src} imports {target}")
    assert not bad, "imports that run back up the layers:\n" + "\n".join(bad)


def test_the_layer_check_can_fail():
    assert LEVEL["empirical.cli"] > LEVEL["empirical.experiments.reproduce"]
    assert LEVEL["empirical.experiments.reproduce"] > LEVEL["empirical.train"]
    assert unit_of("empirical.analysis.phases") == "empirical.analysis.phases"
    assert unit_of("empirical.analysis.fourier") == "empirical.analysis"
    assert unit_of("empirical.cli.analyze") == "empirical.cli"
    assert unit_of("numpy") is None
    assert unit_of("empirical.families.chain.draw") == "empirical.families"
    assert unit_of("empirical.families.chain.analysis.attention") == "empirical.families.analysis"
    assert LEVEL["empirical.families.analysis"] > LEVEL["empirical.families"]
