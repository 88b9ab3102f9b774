"""`python -m empirical COMMAND ...`: one entry point, each command in its own module."""

from __future__ import annotations

import importlib
import sys

# command -> (module with a `main(argv) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "sample": ("empirical.cli.sample", "print sequences of a split or evaluation set as text"),
    "train": ("empirical.cli.train", "train the model (configs/paper.toml by default)"),
    "analyze": ("empirical.cli.analyze", "mechanistic analysis of a run's checkpoints"),
    "compare-qk": ("empirical.cli.compare_qk", "theory's predicted vs observed layer-2 QK update"),
    "sweep": ("empirical.cli.sweep", "Figure 3 sweeps with batched multi-model training"),
    "grid": ("empirical.cli.grid", "named config variants x seeds, trained as batched models"),
    "reproduce": ("empirical.cli.reproduce", "the whole paper, one command"),
}


def usage() -> str:
    lines = ["usage: python -m empirical COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<11} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines.append("\n`python -m empirical COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}; allowed: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            print(f"error: command {name!r} is not available in this version", file=sys.stderr)
            return 2
        raise
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
