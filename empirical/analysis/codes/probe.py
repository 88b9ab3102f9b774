"""(a) A linear probe for the sequence's form from the codes at `=` (docs/heads.md).

Trained on sequences of the trained forms (the run's training distribution, held-out pairs
out), scored per evaluation set: the held-out compositions (novel orderings, held-out pairs,
a variable at a position it never held: 1var/var, 1var/both, 2var/var, 2var/both) and the
trained forms' own sets (0var/ind, 1var/ind, 2var/ind). The probe is
`empirical.analysis.probes.train_linear_probe` (multinomial logistic regression, L-BFGS,
standardised features). Beside it, the rules it could be confused with:

- majority: the training data's most common class, for every sequence;
- shuffled labels: the same probe trained on the codes with the labels permuted;
- initial codes: the same probe on the codes of the run's step-0 snapshot (what the input
  alone puts into untrained attention);
- input layout: the same probe on the one-hot token type at every position (the form is a
  function of the input: this is the input's own information, 100% by construction).
"""

from __future__ import annotations

import torch
from torch import Tensor

from empirical.analysis.codes.extract import TARGETS, features, layout, targets
from empirical.analysis.probes import train_linear_probe
from empirical.task.batch import Batch

HELD_OUT_SETS = ("curated/novel_orderings", "curated/held_out_pairs", "1var/var", "1var/both",
                 "2var/var", "2var/both")  # fmt: skip
TRAINED_SETS = ("0var/ind", "1var/ind", "2var/ind")
GOAL = 0.95  # the probe's goal where the model itself reaches it (docs/heads.md)


def fit_and_score(X_train: Tensor, y_train: Tensor, tests: dict[str, tuple[Tensor, Tensor]],
                  n_classes: int, steps: int = 100) -> dict[str, float | None]:  # fmt: skip
    """The probe trained on (X_train, y_train) (rows with y < 0 left out), its accuracy on
    each test set's scored rows (None: none scored)."""
    keep = y_train >= 0
    names = [n for n, (_, y) in tests.items() if bool((y >= 0).any())]
    if not names or len(torch.unique(y_train[keep])) < 2:
        return dict.fromkeys(tests)
    X_test = torch.cat([tests[n][0][tests[n][1] >= 0] for n in names])
    y_test = torch.cat([tests[n][1][tests[n][1] >= 0] for n in names])
    res = train_linear_probe(X_train[keep], y_train[keep], X_test, y_test, n_classes, steps)
    correct = (res.test_pred.cpu() == y_test).double()
    out: dict[str, float | None] = dict.fromkeys(tests)
    start = 0
    for n in names:
        k = int((tests[n][1] >= 0).sum())
        out[n] = correct[start : start + k].mean().item()
        start += k
    return out


def majority(y_train: Tensor, tests: dict[str, Tensor]) -> dict[str, float | None]:
    """The accuracy of always answering the training data's most common class."""
    y = y_train[y_train >= 0]
    top = int(torch.mode(y).values) if len(y) else -1
    return {n: ((t[t >= 0] == top).double().mean().item() if bool((t >= 0).any()) else None)
            for n, t in tests.items()}  # fmt: skip


def probe_forms(train: Batch, codes_train: Tensor, sets: dict[str, Batch],
                codes_sets: dict[str, Tensor], p: int, K: int, seed: int = 0,
                init: tuple[Tensor, dict[str, Tensor]] | None = None) -> dict:  # fmt: skip
    """Per target of `TARGETS`: the probe's accuracy on every set and its controls' (module
    docstring). `init`: (training codes, {set: codes}) of the step-0 snapshot, or None."""
    y_train = targets(train)
    y_sets = {n: targets(b) for n, b in sets.items()}
    X_train = features(codes_train)
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(train), generator=gen)
    lay_train = layout(train, p, K)
    out = {}
    for name, (n_classes, _) in TARGETS.items():
        def tests(X_of, name=name):
            return {s: (X_of(s), y_sets[s][name]) for s in sets}

        entry = {
            "probe": fit_and_score(X_train, y_train[name], tests(lambda s: features(codes_sets[s])),
                                   n_classes),
            "majority": majority(y_train[name], {s: y_sets[s][name] for s in sets}),
            "shuffled_labels": fit_and_score(X_train, y_train[name][perm],
                                             tests(lambda s: features(codes_sets[s])), n_classes),
            "input_layout": fit_and_score(lay_train, y_train[name],
                                          tests(lambda s: layout(sets[s], p, K)), n_classes),
        }  # fmt: skip
        if init is not None:
            entry["initial_codes"] = fit_and_score(
                features(init[0]), y_train[name], tests(lambda s: features(init[1][s])), n_classes
            )
        entry["n_scored"] = {s: int((y_sets[s][name] >= 0).sum()) for s in sets}
        out[name] = entry
    return out
