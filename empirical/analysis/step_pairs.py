"""The `--first-spike-steps` / `--second-spike-steps` values of `python -m empirical analyze`
(torch-free, so the command checks them before importing torch)."""

from __future__ import annotations


def parse_steps(text: str | None) -> str | tuple[int, int] | None:
    """'auto' (or None) -> 'auto'; 'off' / 'none' -> None; 'A,B' -> (A, B) with A < B."""
    if text is None or text.strip().lower() == "auto":
        return "auto"
    if text.strip().lower() in ("off", "none"):
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        a, b = (int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"{text!r}: expected two steps A,B (e.g. 5301,5401), 'auto' or 'off'"
        ) from None
    if a >= b:
        raise ValueError(f"{text!r}: the first step must come before the second")
    return a, b
