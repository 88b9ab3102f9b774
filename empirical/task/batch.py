"""`Batch`: sequences of the task with their labels and the facts analysis code needs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

FIELDS = ("tokens", "labels", "n_vars", "operand_values", "value_positions", "operand_vars")
# per-position labels, for a family whose every node is a target (the graph family); None in
# the others, whose batches, files and training are then what they were before these existed
OPTIONAL = ("targets", "target_depths", "pos_offset")


@dataclass
class Batch:
    """n sequences, all fields long tensors on one device: tokens (n, L); labels (n,) = sum of
    the operand values mod p; n_vars (n,) in {0, 1, 2} (`c+c` counts 2); operand_values (n, 2)
    resolved values of the operands at L-3, L-2; value_positions (n, 2) where each operand's
    value sits (the operand itself for a number, else the number assigned to the variable);
    operand_vars (n, 2) variable index 0..K-1 at each operand position, -1 for a number.

    Optional (None unless the family labels positions): targets (n, L) the class at each
    position that has one, -1 elsewhere; target_depths (n, L) the depth of the node labelled
    there (-1 elsewhere; a row's largest is its graph's depth); pos_offset (n,) the position
    the row's first token takes (positional embedding row; 0: the natural positions)."""

    tokens: torch.Tensor
    labels: torch.Tensor
    n_vars: torch.Tensor
    operand_values: torch.Tensor
    value_positions: torch.Tensor
    operand_vars: torch.Tensor
    targets: torch.Tensor | None = None
    target_depths: torch.Tensor | None = None
    pos_offset: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def device(self) -> torch.device:
        return self.tokens.device

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields this batch holds: FIELDS, and the optional ones it has."""
        return FIELDS + tuple(f for f in OPTIONAL if getattr(self, f) is not None)

    @property
    def has_targets(self) -> bool:
        """Whether the batch labels positions (targets), not one answer per row."""
        return self.targets is not None

    def _map(self, fn) -> Batch:
        return Batch(**{f: fn(getattr(self, f)) for f in self.fields})

    def to(self, device: torch.device | str) -> Batch:
        return self._map(lambda t: t.to(device))

    def slice(self, i: int, j: int) -> Batch:
        return self._map(lambda t: t[i:j])

    def __getitem__(self, index) -> Batch:
        """Rows by slice, index tensor or boolean mask; an int gives a one-row Batch."""
        if isinstance(index, int):
            n = len(self)
            if not -n <= index < n:
                raise IndexError(f"row {index} of a Batch of {n}")
            index = index % n
            index = slice(index, index + 1)
        if isinstance(index, torch.Tensor):
            index = index.to(self.tokens.device)
            if index.dtype == torch.bool:
                index = index.nonzero().reshape(-1)
            if index.dim() == 1:
                # index_select: plain 2-D advanced indexing goes parallel early on the CPU
                return self._map(lambda t: t.index_select(0, index))
        return self._map(lambda t: t[index])

    def __iter__(self):
        raise TypeError("iterate over Batch.slice(i, j) chunks or index it; a Batch is not a list")

    @staticmethod
    def cat(batches: list[Batch]) -> Batch:
        fields = batches[0].fields
        if any(b.fields != fields for b in batches):
            raise ValueError("Batch.cat: the batches hold different fields")
        return Batch(**{f: torch.cat([getattr(b, f) for b in batches]) for f in fields})

    def equal(self, other: Batch) -> bool:
        return self.fields == other.fields and all(
            torch.equal(getattr(self, f), getattr(other, f)) for f in self.fields
        )

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {f: getattr(self, f) for f in self.fields}

    @staticmethod
    def from_dict(data: dict[str, torch.Tensor]) -> Batch:
        missing = [f for f in FIELDS if f not in data]
        if missing:
            raise ValueError(f"batch data lacks field(s) {', '.join(missing)}")
        fields = FIELDS + tuple(f for f in OPTIONAL if data.get(f) is not None)
        return Batch(**{f: data[f].long() for f in fields})

    def replace(self, **changes) -> Batch:
        return dataclasses.replace(self, **changes)
