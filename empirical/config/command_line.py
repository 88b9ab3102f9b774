"""What every `python -m empirical` command shares: the parser, the error contract, output
locations checked before any computation, its ending and progress lines.

Each command module defines `run(argv) -> int`, which raises a `UserError` for anything the
user can fix, and `main = main_of(run)`: `run` under the error contract
(disentangled.command_line.run_main): one `error: ...` line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from disentangled.command_line import (
    OneLineParser,
    UsageError,
    UserError,
    check_output_dir,
    check_output_file,
    check_writable_dir,
    prepare_output_dir,
    run_main,
)
from empirical.report.figures import FORMATS

__all__ = [
    "OneLineParser",
    "UsageError",
    "UserError",
    "main_of",
    "overrides_from_lists",
    "parser",
    "positive_int",
    "prepare_output_dir",
    "check_output_dir",
    "check_output_file",
    "check_writable_dir",
]


def parser(prog: str, description: str,
           field_hint: Callable[[str], str | None] | None = None) -> OneLineParser:
    """The argument parser of `python -m empirical <prog>`: bad arguments are one line, and
    an unknown flag named like a config field (`--steps 100`, `field_hint(name)` names it)
    hints the override form where the command takes overrides."""
    ap = OneLineParser(prog=f"python -m empirical {prog}", description=description)

    def hint(name: str) -> str | None:  # only where the command takes overrides
        takes_overrides = any(a.dest == "overrides" and not a.option_strings for a in ap._actions)
        return field_hint(name) if takes_overrides and field_hint is not None else None

    ap.field_hint = hint
    return ap


def main_of(run: Callable[[list[str]], int | None]) -> Callable[..., int]:
    """A command module's `main(argv=None) -> exit status`: `run(argv)` under the error
    contract (for calling a command from Python or a test)."""

    def main(argv: list[str] | None = None) -> int:
        return run_main(run, argv)

    return main


def overrides_from_lists(args, names: tuple[str, ...]) -> None:
    """The `KEY=VALUE` words given after list options (`--seeds 0 1 train.steps=100`) moved
    from those lists to `args.overrides`, in the order given (a key has no `@`: the race's
    configuration names such as `embeddings@lr=1e-4` stay in their list)."""

    def is_override(v: str) -> bool:
        return "=" in v and "@" not in v.split("=", 1)[0]

    for name in names:
        values = getattr(args, name)
        if values is not None:
            args.overrides = list(args.overrides) + [v for v in values if is_override(v)]
            setattr(args, name, [v for v in values if not is_override(v)])


def positive_int(flag: str, value: int, minimum: int = 1) -> int:
    """`value`, or a UsageError naming the flag if it is below `minimum`."""
    if value < minimum:
        raise UsageError(f"{flag} {value}: must be an integer >= {minimum}")
    return value


def positive_ints(args, *names: str, minimum: int = 1) -> None:
    """positive_int of each option `names` (argparse names: `eval_size` is `--eval-size`)."""
    for name in names:
        positive_int(f"--{name.replace('_', '-')}", getattr(args, name), minimum)


def positive_floats(text: str, nan_ok: bool = False) -> tuple[float, ...]:
    """An argparse type: comma-separated numbers > 0 (NaN too if `nan_ok`)."""
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc
    if not vals or any(v <= 0 or (math.isnan(v) and not nan_ok) for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return vals


def set_threads(n: int) -> None:
    """torch's CPU threads: `n`, or torch's default if 0 (imports torch)."""
    import torch

    if n:
        torch.set_num_threads(n)


def add_format_argument(ap, help: str = "figure file format: png (default), pdf or svg") -> None:
    """`--format png|pdf|svg`: the file format of a command's figures."""
    ap.add_argument("--format", choices=FORMATS, default="png", help=help)


def add_member_figures_argument(ap) -> None:
    """`--no-member-figures`: the members trained by a sweep, grid or population draw no
    training_curves.png (about a second each on a CPU); the command's own files are written."""
    ap.add_argument("--no-member-figures", action="store_true",
                    help="the members draw no training_curves.png (about a second each on a "
                    "CPU); the command's own files are written")  # fmt: skip


def add_output_arguments(ap, threads: bool = False, figures: bool = False) -> None:
    """--threads and --no-figures (if asked), --quiet and --format, in that order."""
    if threads:
        ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    if figures:
        ap.add_argument("--no-figures", action="store_true", help="numbers only")
    ap.add_argument("--quiet", action="store_true", help="no progress and no summary print")
    add_format_argument(ap)


def print_outputs(paths: dict, quiet: bool) -> None:
    """A command's ending: its summary.md printed, then the files it wrote (nothing if quiet)."""
    if not quiet:
        print(paths["summary"].read_text())
        print(f"wrote {', '.join(str(p) for p in paths.values())}")


def say(msg: str) -> None:
    """A progress line on stderr (the summary goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)
