"""A torch device from the name a user gave (`train.device`, `--device`), and the kind of CPU
a run or a benchmark ran on (float32 rounds differently on different kinds)."""

from __future__ import annotations

import torch

from disentangled.errors import UsageError
from empirical.report.provenance import cpu_model

__all__ = ["cpu_kind", "cpu_model", "resolve_device"]


def resolve_device(
    name: str | None, what: str = "--device", error: type[Exception] = UsageError
) -> torch.device:
    """`name` as a torch device: "auto" (or None) is CUDA when available, else the CPU. A name
    torch does not know, or a CUDA device this machine lacks, raises `error` naming `what` (the
    config field or flag the name came from), the value and what is allowed."""
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise error(
            f"{what} = {name!r} is not a device; allowed 'auto', 'cpu', 'cuda', 'cuda:N'"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise error(f"{what} = {name!r} but CUDA is not available here; use 'auto' or 'cpu'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise error(
                f"{what} = {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    return device


def cpu_kind() -> dict[str, str]:
    """This machine's kind as golden files key it: the CPU's name, torch's CPU capability
    (AVX2, AVX512, ...) and torch's version."""
    capability = torch.backends.cpu.get_cpu_capability()
    return {"cpu": cpu_model(), "capability": capability, "torch": torch.__version__}
