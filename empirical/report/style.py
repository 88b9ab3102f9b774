"""What every figure of the analysis shares: resolution, colours, saving, phase marks and
the labels of a matrix's axes.

Colour maps: viridis / cividis for magnitudes, RdBu for signed values (empirical.report.figures);
line colours from Okabe & Ito's colour-blind-safe palette, none of them yellow on white.
"""

from __future__ import annotations

import numpy as np

from empirical.report.figures import DIVERGING, OKABE_ITO, SEQUENTIAL, save_figure
from empirical.report.phase_marks import draw_phase_marks

DPI = 110
C = OKABE_ITO
# one colour per series (measures, variables), none of them yellow on white
CYCLE = [C[k] for k in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")]
CYCLE += ["#882255", "#44AA99", "#999933", "#661100", "#6699CC"]
# the two compared steps around a spike
BEFORE, AFTER = C["orange"], C["blue"]


def save(fig, path, fmt=None):
    """Write `fig` to `path` (png / pdf / svg) and close it; None: leave it open."""
    return save_figure(fig, path, fmt, dpi=DPI)


def phase_marks(ax, phases, label: bool = True):
    """The phases' jumps, as every figure marks them (empirical.report.phase_marks)."""
    draw_phase_marks(ax, phases, label=label)


def label_matrix_axes(ax, labels, rotation=None, fontsize=None):
    """One tick per row and column of a square matrix, named by `labels` (the column
    labels rotated by `rotation` degrees)."""
    n = len(labels)
    x_style = {} if rotation is None else {"rotation": rotation}
    size = {} if fontsize is None else {"fontsize": fontsize}
    ax.set_xticks(range(n), labels, **x_style, **size)
    ax.set_yticks(range(n), labels, **size)


def attention_heatmap(ax, pattern, labels):
    """An attention pattern [query, key] on 0..1, both axes named "position:token"; a signed
    one (linear attention's and HYLA's codes, docs/heads.md) on a diverging scale symmetric
    about 0. Returns the image (for a colour bar)."""
    values = np.asarray(pattern, dtype=float)
    if np.nanmin(values, initial=0.0) < 0:
        top = max(float(np.nanmax(np.abs(values), initial=0.0)), 1e-12)
        im = ax.imshow(values, cmap=DIVERGING, vmin=-top, vmax=top)
    else:
        im = ax.imshow(values, cmap=SEQUENTIAL, vmin=0, vmax=1)
    label_matrix_axes(ax, labels, rotation=90, fontsize=8)
    ax.set_xlabel("key (position:token)")
    ax.set_ylabel("query (position:token)")
    return im
