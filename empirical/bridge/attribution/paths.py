"""Path integrals of the targets' gradients, split by parameter group (empirical.model.groups);
what the groups miss of the total is the residual (docs/attribution.md, "Paths").

    along_steps(states, targets)       # the replayed training, each step split by STEP_RULES
    along_segments(weights, targets)   # straight lines between snapshots, Gauss-Legendre
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
from torch import Tensor

from empirical.bridge.attribution.options import STEP_RULES
from empirical.model.groups import groups_of_names

COMPOSITE = {"simpson4": 4, "simpson8": 8}  # composite Simpson rules: pieces per step


@dataclass
class PathAttribution:
    """Per piece of the path (a step or a segment), per target, per group: that piece's
    part of the target's change. `pieces[i]` = (step_from, step_to)."""

    targets: list[str]
    groups: list[str]
    rule: str  # the headline rule: one of STEP_RULES, or "gauss-legendre-N"
    pieces: list[tuple[int, int]] = field(default_factory=list)
    rules: dict[str, list[np.ndarray]] = field(default_factory=dict)  # each [targets, groups]
    start_values: dict[str, float] = field(default_factory=dict)
    end_values: dict[str, float] = field(default_factory=dict)

    def add(self, parts: dict[str, np.ndarray]) -> None:
        """One more piece's parts, per rule."""
        for rule, part in parts.items():
            self.rules.setdefault(rule, []).append(part)

    def table(self, rule: str | None = None) -> np.ndarray:
        """[n_pieces, n_targets, n_groups] of `rule` (default: the headline)."""
        rows = self.rules.get(rule or self.rule, [])
        return np.stack(rows) if rows else np.zeros((0, len(self.targets), len(self.groups)))

    def result(self, rule: str | None = None) -> dict[str, dict]:
        """{target: {"total", "groups": {group: part}, "sum_of_groups", "residual",
        "residual_rel"}} of `rule` (default: the headline): total = f(end) - f(start);
        residual = total - the groups' sum; residual_rel = |residual| / |total|."""
        summed = self.table(rule).sum(0)
        out = {}
        for i, t in enumerate(self.targets):
            total = self.end_values[t] - self.start_values[t]
            parts = {g: float(summed[i, j]) for j, g in enumerate(self.groups)}
            s = float(summed[i].sum())
            residual = total - s
            out[t] = {
                "total": total, "groups": parts, "sum_of_groups": s, "residual": residual,
                "residual_rel": abs(residual) / abs(total) if total else float("inf"),
            }  # fmt: skip
        return out


def _dots(grads: Mapping[str, Mapping[str, Tensor]], delta: Mapping[str, Tensor],
          targets: list[str], groups: dict[str, list[str]]) -> np.ndarray:  # fmt: skip
    """[n_targets, n_groups]: <gradient, delta> summed over each group's parameters."""
    out = np.zeros((len(targets), len(groups)))
    for i, t in enumerate(targets):
        for j, names in enumerate(groups.values()):
            out[i, j] = sum(float((grads[t][n] * delta[n]).sum()) for n in names)
    return out


def along_steps(
    states: Iterable[tuple[int, dict[str, Tensor]]], targets, rule: str = "simpson"
) -> PathAttribution:
    """The replayed path (float64 weights at every step, in order), split by `rule` (one of
    STEP_RULES); every rule's parts are kept (`rules`), so each one's
    residual can be reported."""
    if rule not in STEP_RULES:
        raise ValueError(f"rule {rule!r}: allowed {', '.join(STEP_RULES)}")
    need_mid = rule in ("midpoint", "simpson", *COMPOSITE)
    it: Iterator = iter(states)
    step, w = next(it)
    groups = groups_of_names(list(w))
    names = targets.names
    out = PathAttribution(names, list(groups), rule)
    out.start_values = targets.values(w)
    g = targets.gradients(w)
    for next_step, w_next in it:
        delta = {n: w_next[n] - w[n] for n in w}
        g_next = targets.gradients(w_next)
        parts = {"start": _dots(g, delta, names, groups),
                 "end": _dots(g_next, delta, names, groups)}  # fmt: skip
        parts["trapezoid"] = 0.5 * (parts["start"] + parts["end"])
        if need_mid:
            mid = {n: w[n] + 0.5 * delta[n] for n in w}
            parts["midpoint"] = _dots(targets.gradients(mid), delta, names, groups)
            parts["simpson"] = (parts["trapezoid"] + 2.0 * parts["midpoint"]) / 3.0
        if rule in COMPOSITE:  # composite Simpson on n pieces: 1 4 2 4 ... 4 1 / (3n)
            n = COMPOSITE[rule]
            inner = parts["midpoint"] * 2.0
            for j in range(1, n):
                if 2 * j != n:
                    point = {k: w[k] + (j / n) * delta[k] for k in w}
                    grads = targets.gradients(point)
                    inner = inner + (4.0 if j % 2 else 2.0) * _dots(grads, delta, names, groups)
            parts[rule] = (2.0 * parts["trapezoid"] + inner) / (3 * n)
        del parts["end"]
        out.pieces.append((step, next_step))
        out.add(parts)
        step, w, g = next_step, w_next, g_next
    out.end_values = targets.values(w)
    return out


def along_segments(
    weights: Iterable[tuple[int, dict[str, Tensor]]], targets, nodes: int = 8
) -> PathAttribution:
    """Straight lines between consecutive snapshots (float64 weights, in order),
    Gauss-Legendre quadrature with `nodes` points on each (module docstring)."""
    x, wq = np.polynomial.legendre.leggauss(nodes)
    s, wq = (x + 1) / 2, wq / 2  # nodes and weights on [0, 1]
    it: Iterator = iter(weights)
    step, w = next(it)
    groups = groups_of_names(list(w))
    names = targets.names
    out = PathAttribution(names, list(groups), f"gauss-legendre-{nodes}")
    out.start_values = targets.values(w)
    for next_step, w_next in it:
        delta = {n: w_next[n] - w[n] for n in w}
        part = np.zeros((len(names), len(groups)))
        for si, wi in zip(s, wq, strict=True):
            point = {n: w[n] + float(si) * delta[n] for n in w}
            part += float(wi) * _dots(targets.gradients(point), delta, names, groups)
        out.pieces.append((step, next_step))
        out.add({out.rule: part})
        step, w = next_step, w_next
    out.end_values = targets.values(w)
    return out
