"""One sweep's results from several `results.json` files (seeds or values trained apart), pooled
as if they had been one sweep and summarised again from the members' rows (docs/sweep.md,
"Seeds trained apart: `--merge`").

    python -m empirical sweep --merge A/results.json B/results.json --out DIR
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from disentangled.errors import UserError
from empirical.experiments.sweep.results import summarize

SAME = ("param", "metric", "target")


def read_results(path: Path) -> dict:
    """A sweep's results.json, or a UserError naming the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--merge {path}: no such file (a sweep's results.json)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"--merge {path}: not a JSON file ({exc})") from None
    missing = [k for k in (*SAME, "members", "title") if k not in data]
    if not isinstance(data, dict) or missing:
        raise UserError(f"--merge {path}: not a sweep's results.json (missing {missing})")
    if data.get("at_step") is not None:
        raise UserError(
            f"--merge {path}: a summary at step {data['at_step']}; merge final summaries only"
        )
    return data


def merge_results(paths: list[Path]) -> dict:
    """The results dict of the members of every file in `paths` (at least two), summarised."""
    if len(paths) < 2:
        raise UserError(f"--merge: give at least two results.json files (got {len(paths)})")
    parts = [read_results(p) for p in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:], strict=True):
        for key in SAME:
            if part[key] != first[key]:
                raise UserError(
                    f"--merge {path}: {key} = {part[key]!r}, but {paths[0]} has "
                    f"{first[key]!r} (only one sweep's results can be merged)"
                )
    rows, seen = [], {}
    for path, part in zip(paths, parts, strict=True):
        for row in part["members"]:
            if row["member"] in seen:
                raise UserError(
                    f"--merge {path}: member {row['member']} is also in {seen[row['member']]}"
                )
            seen[row["member"]] = path
            rows.append(row)
    seeds = sorted({r["seed"] for r in rows})
    n = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
    title = re.sub(r"\d+ seeds?\)", f"{n})", first["title"])
    stopped = {k: v for part in parts for k, v in (part.get("stopped_members") or {}).items()}
    return summarize(
        rows, param=first["param"], x_label=first.get("x_label", first["param"]),
        metric=first["metric"], target=first["target"],
        missing=[m for part in parts for m in part.get("missing_members", [])], title=title,
        command="; ".join(str(part.get("command")) for part in parts), stopped=stopped,
    ) | {"merged_from": [str(p) for p in paths]}  # fmt: skip


def figure_stem(results: dict) -> str:
    """NAME, the merged results' figure: the sweep config's name, the title's first word."""
    return results["title"].split(":", 1)[0].strip()
