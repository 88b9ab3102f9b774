"""Every command the README and the docs show still parses: its flags exist, its config file
exists, its overrides name real fields with valid values (issue 24: commands that cannot drift).

The commands are read from README.md, paper_checks.md and docs/*.md: every `python -m
empirical|disentangled|theory ...` in a fenced block (continuation lines joined) or an inline
code span. Each is handed to its own command's argument parser, which is stopped right after
parsing (nothing runs, nothing is written); a usage line (`[--step S]`, `...`, `$W`) is not a
command and is skipped, and a bare mention in prose (`python -m empirical analyze`) only has
to name a real command. The commands that run in minutes are run for real elsewhere
(tests/test_tl_quickstart.py, tests/test_reproduce.py, the quick path in README's first
section by tests/test_quick_path.py).
"""

from __future__ import annotations

import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from disentangled.command_line import OneLineParser, UsageError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "paper_checks.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"python3? -m (empirical|disentangled|theory)\b[^`\n]*")
PLACEHOLDER = re.compile(r"[\[\]<>{}$]|\.\.\.")
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")  # RUN_DIR, N, S: a placeholder


@dataclass(frozen=True)
class DocCommand:
    where: str  # file:line
    package: str
    args: tuple[str, ...]
    inline: bool  # from an inline code span (a mention in prose may omit required arguments)


def _logical_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, inline?) for fenced-block lines (with `\\` continuations joined) and
    inline code spans outside fences."""
    out, fenced, buffer, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if not buffer:
                start = n
            if line.rstrip().endswith("\\"):
                buffer += line.rstrip()[:-1] + " "
                continue
            out.append((start, buffer + line, False))
            buffer = ""
        else:
            out += [(n, span, True) for span in re.findall(r"`([^`]+)`", line)]
    return out


def doc_commands() -> list[DocCommand]:
    found = []
    for path in DOCS:
        for n, line, inline in _logical_lines(path.read_text()):
            for match in COMMAND.finditer(line):
                text = re.split(r"\s#|;|&&|\|\||\||\)|\bdone\b", match.group(0))[0]
                try:
                    words = shlex.split(text)
                except ValueError:
                    continue  # an unbalanced quote: prose, not a command
                package, args = words[2], words[3:]
                if any(PLACEHOLDER.search(a) for a in args) or (args and NAME.match(args[0])):
                    continue  # usage syntax, or `python -m empirical COMMAND`
                # a placeholder value (`--seeds S`, `--step N`, `--out DIR`) stands for any value
                args = tuple(
                    "0" if NAME.match(a) and i and args[i - 1].startswith("--") else a
                    for i, a in enumerate(args)
                )
                where = f"{path.relative_to(ROOT)}:{n}"
                found.append(DocCommand(where, package, args, inline))
    return found


class Parsed(Exception):
    def __init__(self, namespace):
        self.namespace = namespace


def parse_only(command: DocCommand, monkeypatch):
    """What the command makes of its arguments, nothing run: `python -m empirical`'s options
    (every field checked; not `check()`, which looks at the file system), or the namespace of
    `python -m theory` / `-m disentangled`'s parser."""
    args = list(command.args)
    if command.package == "empirical":
        from empirical.__main__ import COMMANDS, options_class
        from empirical.config.options import parse_options

        if not args:
            return None
        if args[0] not in COMMANDS:
            raise UsageError(f"unknown command {args[0]!r}")
        cls = options_class(COMMANDS[args[0]])
        monkeypatch.setattr(cls, "check", lambda self: None, raising=False)
        return parse_options(cls, args[1:])
    for method in ("parse_args", "parse_intermixed_args"):
        original = getattr(OneLineParser, method)

        def parse_and_stop(self, args=None, namespace=None, _original=original):
            raise Parsed(_original(self, args, namespace))

        monkeypatch.setattr(OneLineParser, method, parse_and_stop)
    try:
        importlib.import_module(f"{command.package}.__main__")._main(args)
    except Parsed as parsed:
        return parsed.namespace
    raise AssertionError(f"{command.where}: the command did not parse its arguments")


COMMANDS = doc_commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 80  # the scan reads the docs (87 commands when written)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_a_documented_command_parses(command, monkeypatch):
    from empirical.config.io import apply_overrides, from_dict, to_dict
    from empirical.runs.config import RunConfig, load_run_config

    try:
        ns = parse_only(command, monkeypatch)
    except UsageError as exc:
        if command.inline and "required" in str(exc):
            return  # a mention of the command in prose, without its arguments
        raise AssertionError(f"{command.where}: {' '.join(command.args)}: {exc}") from exc
    if ns is None:
        return
    config = getattr(ns, "config", None)
    if isinstance(config, str) and config.endswith((".toml", ".json")):
        assert (ROOT / config).is_file(), f"{command.where}: no config file {config}"
    overrides = [o for o in getattr(ns, "overrides", None) or [] if "=" in o]
    if overrides and command.args[:1] in (("train",), ("reproduce",), ("sample",)):
        # the run config's fields, their types and ranges (sweep and grid configs add tables
        # of their own; their overrides are checked by those commands' tests)
        if isinstance(config, str) and command.args[0] != "sample":
            load_run_config(ROOT / config, overrides)
        else:
            from_dict(RunConfig, apply_overrides(to_dict(RunConfig()), RunConfig, overrides))
