"""The run's metrics log: one JSON object per line (`metrics.jsonl`), one line per evaluation.

{"step": 250, "train_loss": 4.1, "lr": 0.001, "elapsed_s": 12.3,
 "acc": {"0var/ind": 0.41, ...}, "loss": {"0var/ind": 3.2, ...}, "fingerprint": "..."}

`fingerprint`: the run's config fingerprint (older logs lack it: accepted). A line that is
not a record of this run (not JSON, no integer `step` or `acc` table, a step not after the
previous one, another run's fingerprint) is an error naming the line and its repair
(`python -m empirical repair RUN_DIR`). Only an incomplete last line (a crash during the
append, or a reader beside the writer) is skipped, with a note on stderr; a resume removes it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disentangled.errors import UserError
from empirical.report.files import append_text, atomic_write_bytes


class MetricsError(UserError, ValueError):
    """A metrics log with a line that is not a record of this run; the message names the line
    and the repair."""


@dataclass
class MetricsScan:
    """What a metrics log holds: its valid records, the lines that are not, and a torn last
    line (written incompletely by a crash)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line number of each record
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line number, what is wrong)
    torn: int | None = None  # line number of an incomplete last line
    n_lines: int = 0


def _problem(record: Any, previous: int | None, fingerprint: str | None) -> str | None:
    """What makes a parsed line not a record of this run (None: it is one)."""
    if not isinstance(record, dict):
        return f"is {type(record).__name__}, not a record"
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return f"has no integer step (step = {step!r})"
    if not isinstance(record.get("acc"), dict):
        return "has no acc table"
    if previous is not None and step <= previous:
        return f"has step {step}, not after the previous record's step {previous}"
    found = record.get("fingerprint")
    if fingerprint and found and found != fingerprint:
        return (
            f"comes from another run (config fingerprint {str(found)[:12]}, this run's "
            f"{fingerprint[:12]})"
        )
    return None


def scan_metrics(path: str | os.PathLike, fingerprint: str | None = None) -> MetricsScan:
    """Read every line of the log and sort it into records and problems (reads nothing else;
    a missing file is an empty scan)."""
    path = Path(path)
    scan = MetricsScan()
    if not path.exists():
        return scan
    data = path.read_bytes()
    complete_end = data.endswith(b"\n") or not data
    lines = data.split(b"\n")[:-1] if complete_end else data.split(b"\n")
    scan.n_lines = len(lines)
    previous = None
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last_unterminated = i == len(lines) and not complete_end
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if last_unterminated:
                scan.torn = i
            else:
                scan.bad.append((i, f"is not JSON ({exc.__class__.__name__})"))
            continue
        why = _problem(record, previous, fingerprint)
        if why is not None:
            scan.bad.append((i, why))
            continue
        scan.records.append(record)
        scan.lines.append(i)
        previous = record["step"]
    return scan


def repair_hint(path: Path) -> str:
    return (
        f"`python -m empirical repair {path.parent}` keeps every valid line, drops the rest "
        "and says how many"
    )


_NOTED: set[tuple[str, int]] = set()


def _note_torn(path: Path, line: int) -> None:
    key = (str(path), line)
    if key not in _NOTED:
        _NOTED.add(key)
        print(
            f"note: {path}: line {line} is incomplete (a crash during a write, or a writer "
            "appending to it this instant); ignored",
            file=sys.stderr,
        )


def _checked(path: Path, scan: MetricsScan) -> list[dict[str, Any]]:
    if scan.bad:
        line, why = scan.bad[0]
        more = f" (and {len(scan.bad) - 1} more bad line(s))" if len(scan.bad) > 1 else ""
        raise MetricsError(f"{path}: line {line} {why}{more}; {repair_hint(path)}")
    if scan.torn is not None:
        _note_torn(path, scan.torn)
    return scan.records


def read_metrics(path: str | os.PathLike, fingerprint: str | None = None) -> list[dict[str, Any]]:
    """Every record of the log. A line that is not a record of this run (see the module
    docstring; `fingerprint`: the run's, None: not checked) is a MetricsError naming it; an
    incomplete last line is skipped with a note."""
    path = Path(path)
    return _checked(path, scan_metrics(path, fingerprint))


def append_metrics(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record (a failed write leaves the log as it was:
    empirical.report.files.append_text)."""
    append_text(path, json.dumps(record) + "\n")


def truncate_metrics(
    path: str | os.PathLike, last_step: int, fingerprint: str | None = None
) -> int:
    """Keep the records with step <= last_step (resuming from a checkpoint at last_step); a
    bad line is a MetricsError (nothing is rewritten), an incomplete last line is dropped.
    Returns how many records were dropped."""
    path = Path(path)
    scan = scan_metrics(path, fingerprint)
    records = _checked(path, scan)
    kept = [r for r in records if r["step"] <= last_step]
    if len(kept) != len(records) or scan.torn is not None:
        atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in kept).encode())
    return len(records) - len(kept)


def accuracy_series(records: list[dict[str, Any]], name: str) -> tuple[list[int], list[float]]:
    """(steps, accuracies) of evaluation set `name` over the log."""
    steps = [r["step"] for r in records if name in r.get("acc", {})]
    accs = [r["acc"][name] for r in records if name in r.get("acc", {})]
    return steps, accs
