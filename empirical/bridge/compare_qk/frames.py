"""The comparison's frames: how an observed [d, d] matrix of W_QK's space and the theory's G1
are put side by side (docs/compare_qk.md, "Frames"). A frame pairs a reading of `coords`
('raw', 'orth', 'dual') with what G1 becomes in it: 'dual' (the default) and 'score' (raw
score change against (QQ^T) G1 (KK^T) / s^2) are exact, a gradient along G1 scores cos 1;
'orth' and 'raw' (legacy) hold the reading against G1 itself.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from empirical.bridge.compare_qk.coords import READINGS, Coordinates
from empirical.bridge.compare_qk.options import FRAMES

READ = {"dual": "dual", "score": "raw", "orth": "orth", "raw": "raw"}
EXACT = {"dual": True, "score": True, "orth": False, "raw": False}
DESCRIPTION = {
    "dual": "dual frame (the label-space matrix G with X = Q^T G K / s) vs G1: exact",
    "score": "score change Q X K^T / s vs the score change of a step along G1, "
    "(QQ^T) G1 (KK^T) / s^2: exact, Gram-weighted",
    "orth": "Loewdin frame vs G1 (legacy: reads (QQ^T)^1/2 G (KK^T)^1/2)",
    "raw": "score change vs G1 itself (legacy: reads (QQ^T) G (KK^T))",
}


def check_frame(frame: str) -> str:
    if frame not in FRAMES:
        raise ValueError(f"frame must be one of {FRAMES}, got {frame!r}")
    return frame


class Frames:
    """The three readings of one checkpoint's labelled vectors, and G1 in each frame."""

    def __init__(self, raw: Coordinates):
        self.raw = raw
        self.coords = {"raw": raw, "orth": raw.orthonormalized(), "dual": raw.dual()}

    def read(self, X: Tensor, reading: str) -> np.ndarray:
        return self.coords[reading].project(X)

    def readings(self, X: Tensor) -> dict[str, np.ndarray]:
        """reading -> the labelled block of X, for every reading."""
        return {r: self.read(X, r) for r in READINGS}

    def predicted(self, G: np.ndarray, frame: str) -> np.ndarray:
        """What the comparison in `frame` holds an observation against: in the exact frames
        the reading of Q^T G K / s (a network whose label-space gradient is G), else G."""
        check_frame(frame)
        if EXACT[frame]:
            return self.read(self.raw.gradient_of(G), READ[frame])
        return np.asarray(G, dtype=float)
