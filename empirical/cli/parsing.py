"""The parser of a `python -m empirical` command (empirical.config.command_line.parser) whose
unknown flags named like a run-config field hint the override form (`--steps 100`:
`train.steps=100`)."""

from __future__ import annotations

from empirical.config.command_line import OneLineParser
from empirical.config.command_line import parser as command_parser
from empirical.runs.config import config_field


def parser(prog: str, description: str) -> OneLineParser:
    return command_parser(prog, description, field_hint=config_field)
