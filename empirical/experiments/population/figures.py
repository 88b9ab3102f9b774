"""The figures of a population's claims: `plot_jumps`, `plot_survival`, `plot_final`,
`plot_theory` (each takes `path=None` and `fmt=None` and returns the matplotlib Figure, as
empirical.report.figures says). The paper's run is marked in the jump figures of a population
of its config."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from empirical.experiments.population.claims import second_without_first
from empirical.report.figures import OKABE_ITO, save_figure
from empirical.report.population_stats import Survival

JUMPS = (("first", "first spike (variable routing)"),
         ("second", "second spike: the var-restricted sets' steepest rise"))
COLOURS = [OKABE_ITO[c] for c in ("blue", "vermillion", "green", "orange", "purple", "sky")]
STYLES = ("-", "--", ":", "-.")  # curves that coincide stay visible


def _title(claims: dict) -> str:
    return f"{claims['config']}: {claims['members']} members"


def plot_jumps(claims: dict, path=None, fmt: str | None = None):
    """Two panels: the distribution of the first and the second jump step over the members,
    the paper's run's jump as a dashed line, the members without the jump in the legend."""
    jumps = claims["jumps"]
    steps_max = max(jumps["last_step"] or [1])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    for ax, (key, label) in zip(axes, JUMPS, strict=True):
        found = [s for s in jumps[key] if s is not None]
        paper = paper_jumps(claims).get(key)
        right = _right_edge(steps_max, paper)
        width = max(right // 40, 1)
        bins = np.arange(0, right + width, width)
        ax.hist(found, bins=bins, color=OKABE_ITO["blue"], edgecolor="white", lw=0.5,
                label=f"members with the jump: {len(found)} of {len(jumps[key])}")  # fmt: skip
        _mark_paper(ax, paper, steps_max, OKABE_ITO["vermillion"])
        ax.plot([], [], " ", label=f"without the jump: {jumps[f'{key}_without']}")
        ax.set_xlim(0, right)
        ax.set_xlabel("training step the jump ends at")
        ax.set_ylabel("members")
        ax.set_title(label, fontsize=10)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"{_title(claims)}: jump steps", fontsize=11)
    return save_figure(fig, path, fmt)


def plot_survival(populations: list[tuple[str, dict]], path=None, fmt: str | None = None,
                  pvalues: dict | None = None):  # fmt: skip
    """Kaplan-Meier curves of each population (label, claims.json content): the share of
    members still before the first (left) and second (right) jump at each step; a tick where
    a member was censored (no jump by its last step). `pvalues`: {label: {"first": p,
    "second": p}}, each later population's log-rank p against the first, in its legend entry.
    The legends sit below the panels, off the curves; the paper's run is marked only where the
    first population is of its config (`paper_jumps`)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
    steps_max = max(max(c["jumps"]["last_step"] or [1]) for _, c in populations)
    base = populations[0][0]
    for ax, (key, label) in zip(axes, JUMPS, strict=True):
        for i, (name, claims) in enumerate(populations):
            surv = claims["jumps"][f"{key}_survival"]
            colour = COLOURS[i % len(COLOURS)]
            xs = [0, *surv["steps"], steps_max]
            ys = [1.0, *surv["survival"], surv["survival"][-1] if surv["survival"] else 1.0]
            ax.step(xs, ys, where="post", color=colour, lw=1.8, ls=STYLES[i % len(STYLES)],
                    label=_survival_label(name, key, claims, surv, base,
                                          (pvalues or {}).get(name, {}).get(key)))  # fmt: skip
            cens = surv["censored"]
            if cens:
                at = [Survival(surv["steps"], surv["survival"]).at(c) for c in cens]
                ax.plot(cens, at, "|", color=colour, ms=10, mew=1.5)
        paper = paper_jumps(populations[0][1]).get(key)
        _mark_paper(ax, paper, steps_max, OKABE_ITO["grey"])
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlim(0, _right_edge(steps_max, paper))
        ax.set_xlabel("training step")
        ax.set_ylabel("share of members before the jump")
        ax.set_title(label, fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    names = ", ".join(n for n, _ in populations)
    tests = f"; p: log-rank against {base}" if len(populations) > 1 else ""
    fig.suptitle(f"Kaplan-Meier survival of the jumps ({names}; | = censored{tests})",
                 fontsize=11)  # fmt: skip
    return save_figure(fig, path, fmt)


def _survival_label(name: str, key: str, claims: dict, surv: dict, base: str,
                    p: float | None) -> str:  # fmt: skip
    """A population's legend entry: how many jump, its log-rank p against the first
    population, and (second spike) how many of its second jumps have no first before them."""
    text = f"{name}: {surv['events']} of {surv['n']} jump"
    if key == "second":
        alone = second_without_first(claims["jumps"]["first"], claims["jumps"]["second"])
        if alone:
            text += f", {alone} with no first jump before"
    if name != base and p is not None:
        text += f"; p = {p:.2g} vs {base}"
    return text


def paper_jumps(claims: dict) -> dict:
    """The paper's run's jump steps ({"first", "second"}) where the population is of the
    paper's run's config (its placed `paper_run` has same_config); {} otherwise: a run of
    another config (another init, more heads) is no reference line for these members."""
    if not (claims.get("paper_run") or {}).get("same_config"):
        return {}
    return claims["jumps"].get("paper") or {}


def _right_edge(steps_max: int, paper: int | None) -> int:
    """The x range's end: the runs' last step, or the paper's jump where it lies within."""
    if paper is None:
        return int(1.03 * steps_max) + 1
    return int(1.03 * (max(steps_max, paper) if paper <= steps_max else steps_max)) + 1


def _mark_paper(ax, paper: int | None, steps_max: int, colour) -> None:
    """The paper's run's jump as a dashed line (in the legend only when the runs end before
    it); nothing when no paper's run was placed."""
    if paper is None:
        return
    if paper <= steps_max:
        ax.axvline(paper, color=colour, ls="--", lw=1.5, label=f"the paper's run: {paper}")
    else:
        ax.plot([], [], "--", color=colour, label=f"the paper's run: {paper} (after these "
                f"runs' last step, {steps_max})")  # fmt: skip


def plot_final(claims: dict, path=None, fmt: str | None = None):
    """Per evaluation set, every member's robust final accuracy (the mean over the last
    `final_window` steps, filled) beside its accuracy at the last step (open), with the mean and its
    multi-bootstrap interval of each; 99% and 95% as lines."""
    sets = list(claims["final"])
    window = claims.get("final_window", 2000)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(sets) + 2), 4.2), layout="constrained")
    rng = np.random.default_rng(0)
    lows = []
    for j, s in enumerate(sets):
        for offset, key, marker, face, label in (
            (-0.17, "final", "o", OKABE_ITO["blue"],
             f"robust final (mean of the last {window} steps)"),
            (0.17, "final_last", "o", "none", "at the last step"),
        ):
            vals = np.array([v for v in claims[key][s] if v is not None], dtype=float) * 100
            if not len(vals):
                continue
            lows.append(vals.min())
            x = j + offset + rng.uniform(-0.06, 0.06, len(vals))
            ax.scatter(x, vals, s=22, marker=marker, facecolors=face,
                       edgecolors=OKABE_ITO["blue"], lw=1, label=label if j == 0 else None,
                       zorder=3)  # fmt: skip
            stats = claims["final_stats"][s]["robust" if key == "final" else "last"]
            if stats:
                lo, hi = (100 * v for v in stats["ci95"])
                ax.errorbar(j + offset, 100 * stats["mean"], yerr=[[100 * stats["mean"] - lo],
                            [hi - 100 * stats["mean"]]], fmt="_", color=OKABE_ITO["black"],
                            ms=14, capsize=3, zorder=4,
                            label="mean, 95% multi-bootstrap" if j == 0 and offset < 0 else None)
    ax.axhline(99, color=OKABE_ITO["green"], ls="--", lw=1, label="99%")
    ax.axhline(95, color=OKABE_ITO["vermillion"], ls=":", lw=1, label="95%")
    low = min(lows) if lows else 0
    ax.set_ylim(max(0.0, low - 2), 100.5)
    ax.set_xticks(range(len(sets)), sets, rotation=40, ha="right")
    ax.set_xlabel("evaluation set")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{_title(claims)}: final accuracy, robust and at the last step", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return save_figure(fig, path, fmt)


def plot_theory(claims: dict, path=None, fmt: str | None = None):
    """Per member, the cosine of G1 with the layer-2 QK update across its first spike (dots)
    and that update's sign-randomised null (95%, bars), whole block and bar_v block."""
    th = claims["theory"]
    names = claims["member_names"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained", sharey=True)
    for ax, (block, label) in zip(axes, (("whole", "whole block"), ("barv", "bar_v block")),
                                  strict=True):  # fmt: skip
        cos, null = th[f"cos_{block}"], th[f"null_{block}"]
        xs = [i for i, c in enumerate(cos) if c is not None]
        ax.scatter(xs, [cos[i] for i in xs], color=OKABE_ITO["blue"], zorder=3,
                   label="cos(G1, update across the first spike)")  # fmt: skip
        ax.scatter(xs, [null[i] for i in xs], marker="_", s=300, color=OKABE_ITO["vermillion"],
                   zorder=3, label="its sign-randomised null (95%)")  # fmt: skip
        ax.axhline(0, color=OKABE_ITO["grey"], lw=0.8)
        if not xs:
            ax.set_ylim(-1, 1)
            ax.text(0.5, 0.5, "no member measured\n(no first spike with snapshots around it)",
                    ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_xlabel("member")
        ax.set_ylabel("cosine")
        above = sum(1 for i in xs if null[i] is not None and cos[i] > null[i])
        ax.set_title(f"{label}: {above} of {len(xs)} measured above the null", fontsize=10)
        ax.legend(fontsize=8, loc="best")
    frame = th.get("frame") or "dual"
    fig.suptitle(f"{_title(claims)}: theory vs run across the first spike ({frame} frame)",
                 fontsize=11)  # fmt: skip
    return save_figure(fig, path, fmt)
