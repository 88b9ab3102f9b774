"""(b) The codes' structure (docs/heads.md): do the codes of one form cluster, across the
training sequences and the held-out compositions?

- a 2-d view: the first two principal components of the training codes (standardised as the
  probe standardises them), every sequence projected, coloured by form;
- nearest centroid: each form's centroid of the training codes; a held-out sequence counts as
  placed when its nearest centroid (Euclidean, standardised) is its own form's;
- silhouette (Rousseeuw 1987) of the forms on training and held-out codes together, on at
  most `max_points` of them: near 1 tight and separate clusters, near 0 overlapping.
"""

from __future__ import annotations

import torch
from torch import Tensor

from empirical.analysis.codes.extract import features, targets
from empirical.task.batch import Batch


def _standardise(X_train: Tensor, *others: Tensor) -> list[Tensor]:
    mean, std = X_train.mean(0), X_train.std(0).clamp_min(1e-8)
    return [(X - mean) / std for X in (X_train, *others)]


def silhouette(X: Tensor, labels: Tensor) -> float | None:
    """The mean silhouette of points X [n, f] with integer labels (None: fewer than two
    labels). A point alone in its label scores 0."""
    classes = torch.unique(labels)
    if len(classes) < 2:
        return None
    D = torch.cdist(X, X)
    own = labels[:, None] == labels[None, :]
    counts = own.sum(1).double()
    a = (D * own).sum(1) / (counts - 1).clamp_min(1)
    b = torch.full((len(X),), float("inf"), dtype=X.dtype)
    for c in classes:
        m = labels == c
        b = torch.where(labels == c, b, torch.minimum(b, D[:, m].mean(1)))
    s = torch.where(counts > 1, (b - a) / torch.maximum(a, b).clamp_min(1e-12), 0.0)
    return s.mean().item()


def code_structure(train: Batch, codes_train: Tensor, sets: dict[str, Batch],
                   codes_sets: dict[str, Tensor], max_points: int = 1500,
                   seed: int = 0) -> dict:  # fmt: skip
    """The 2-d view (`_view`: the projected points, for the figure), nearest-centroid
    accuracy per set, and the silhouette of the forms (training and held-out together)."""
    names = list(sets)
    Z = _standardise(features(codes_train), *(features(codes_sets[n]) for n in names))
    Z_train, Z_sets = Z[0], dict(zip(names, Z[1:], strict=True))
    y_train = targets(train)["form"]
    y_sets = {n: targets(sets[n])["form"] for n in names}
    forms = torch.unique(y_train).tolist()
    centroids = torch.stack([Z_train[y_train == f].mean(0) for f in forms])
    nearest = {}
    for n in names:
        pick = torch.tensor(forms)[torch.cdist(Z_sets[n], centroids).argmin(1)]
        nearest[n] = (pick == y_sets[n]).double().mean().item() if len(pick) else None
    _, _, V = torch.linalg.svd(Z_train - Z_train.mean(0), full_matrices=False)
    axes = V[:2].T  # [f, 2]
    everything = torch.cat([Z_train, *Z_sets.values()])
    labels = torch.cat([y_train, *y_sets.values()])
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(everything), generator=gen)[:max_points]
    return {
        "nearest_centroid": nearest,
        "silhouette": silhouette(everything[pick], labels[pick]),
        "silhouette_points": int(len(pick)),
        "train_forms": forms,
        "_view": {"train": ((Z_train - Z_train.mean(0)) @ axes, y_train),
                  **{n: ((Z_sets[n] - Z_train.mean(0)) @ axes, y_sets[n]) for n in names}},
    }  # fmt: skip
