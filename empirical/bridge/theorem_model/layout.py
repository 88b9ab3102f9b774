"""Where the theorem's objects live in the transformer. Residual (d_model = 2 dim + p): [0, dim)
the theorem's basis (`disentangled.basis.Basis` order), [dim, 2 dim) W_OV's output, then F's
p outputs. Sequence position t holds theorem position `theorem_position[t]`: `+` first (layer
1's sink), then 0..L-5, the operands and `=` (docs/theorem_model.md, "Positions"). Tokens:
empirical.task's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from disentangled.basis import Basis
from empirical.bridge.theorem_model.config import TheoremModelConfig


@dataclass(frozen=True)
class Layout:
    """Index maps of one TheoremModelConfig (see the module docstring)."""

    cfg: TheoremModelConfig

    @property
    def basis(self) -> Basis:
        return Basis(self.cfg.p, self.cfg.K, self.cfg.L)

    @property
    def dim(self) -> int:
        """Size of the theorem basis (2p + K + 3 + L)."""
        return self.basis.dim

    @property
    def d_model(self) -> int:
        return 2 * self.dim + self.cfg.p

    @property
    def ov_offset(self) -> int:
        """First coordinate of W_OV's output space."""
        return self.dim

    @property
    def f_offset(self) -> int:
        """First coordinate of F's output (p coordinates)."""
        return 2 * self.dim

    # -- positions ----------------------------------------------------------------------

    @property
    def theorem_position(self) -> list[int]:
        """theorem_position[t]: the theorem's position held at sequence position t."""
        L = self.cfg.L
        return [L - 4, *range(L - 4), L - 3, L - 2, L - 1]

    @property
    def sequence_position(self) -> list[int]:
        """sequence_position[theta]: the sequence position holding theorem position theta."""
        inverse = [0] * self.cfg.L
        for t, theta in enumerate(self.theorem_position):
            inverse[theta] = t
        return inverse

    # -- tokens -------------------------------------------------------------------------

    def vocab_id(self, label: str) -> int:
        """Token id in empirical.task's vocabulary of a token label of the basis."""
        p, K = self.cfg.p, self.cfg.K
        special = {"+": p + K, "=": p + K + 1, "pad": p + K + 2}
        if label in special:
            return special[label]
        if label.startswith("n"):
            return int(label[1:])
        if label.startswith("v"):
            return p + int(label[1:])
        raise KeyError(f"{label!r} is not a token label")

    @property
    def token_labels(self) -> list[str]:
        """Basis label of every vocabulary id (id order)."""
        p, K = self.cfg.p, self.cfg.K
        return [f"n{m}" for m in range(p)] + [f"v{u}" for u in range(K)] + ["+", "=", "pad"]

    def basis_to_vocab(self) -> torch.Tensor:
        """Lookup (dim,) long: vocabulary id of each token basis index (-1 for non-tokens)."""
        b = self.basis
        out = torch.full((b.dim,), -1, dtype=torch.long)
        for vid, label in enumerate(self.token_labels):
            out[b.index(label)] = vid
        return out

    def to_sequences(self, theorem_tokens: torch.Tensor) -> torch.Tensor:
        """Token ids (N, L) in sequence order from basis token indices (N, L) in theorem
        position order (disentangled's compact chunks)."""
        ids = self.basis_to_vocab()[theorem_tokens]
        if bool((ids < 0).any()):
            raise ValueError("theorem_tokens holds an index that is not a token of the basis")
        return ids[:, self.theorem_position]
