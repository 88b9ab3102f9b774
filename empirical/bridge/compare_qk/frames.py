"""The comparison's frames: how an observed [d, d] matrix of W_QK's space and the theory's G1
are put side by side (docs/compare_qk.md, "Frames").

Every observed matrix X (a gradient, an update, the state) is read in one of three readings of
`coords` ('raw': the labelled scores Q X K^T / s; 'orth': the same on Loewdin-orthonormalised
vectors; 'dual': the label-space matrix G with X = Q^T G K / s). A frame pairs a reading with
what G1 becomes in it:

    frame   reads X as          compared with                  a network whose label-space
                                                                gradient is G1 scores
    dual    dual                G1 (P_Q G1 P_K)                1 (exact; the default)
    score   raw (score change)  (QQ^T) G1 (KK^T) / s^2         1 (exact; Gram-weighted)
    orth    orth (Loewdin)      G1                             < 1 (reads (QQ^T)^1/2 G1 (KK^T)^1/2)
    raw     raw                 G1                             < 1 (reads (QQ^T) G1 (KK^T))

In the exact frames the prediction is G1 pushed through the checkpoint's own vectors
(`coords.Coordinates.gradient_of`) and read like the observation, so that the theorem's
gradient, or a gradient step along it, scores cos 1 whatever the Gram matrices (tested). 'orth'
was the default before issue 20 (its numbers are superseded); 'raw' compares the score change
with G1 literally (the theorem's W^1 = W^0 + eta G1 read as scores).
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from empirical.bridge.compare_qk.coords import READINGS, Coordinates

FRAMES = ("dual", "score", "orth", "raw")
DEFAULT_FRAME = "dual"
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
        """What the comparison in `frame` holds an observation against: in the exact frames,
        the reading of the parameter-space gradient of a network whose label-space gradient
        is G (G itself in 'dual' when the labels are independent); in the legacy frames G."""
        check_frame(frame)
        if EXACT[frame]:
            return self.read(self.raw.gradient_of(G), READ[frame])
        return np.asarray(G, dtype=float)
