"""The race's files, declared once (`report`): race.json (every number; the issue's schema),
summary.md (the table) and race.png (each configuration in the criterion's plane, coloured by
its outcome); written by empirical.report.writer."""

from __future__ import annotations

import matplotlib.pyplot as plt

from empirical.bridge.ladder_dynamics.outputs import steps_text
from empirical.report.figures import OKABE_ITO
from empirical.report.writer import Figure, Json, Report


def _t(x) -> str:
    return "inf" if x is None else f"{x:.3g}"


SUBSETS = {
    "fit": "fit half", "test": "test half", "test_known": "test half, outcome known when "
    "the criterion was written", "test_unseen": "test half, unseen", "new": "new test set",
    "fit_decides": "fit half, where the race decides", "test_decides": "test half, where the "
    "race decides", "new_decides": "new test set, where the race decides",
}  # fmt: skip


def _score(s: dict | None) -> str:
    return "-" if not s else f"{s['right']} of {s['of']} ({s['accuracy']:.0%})"


def _yes(x) -> str:
    return "-" if x is None else ("yes" if x else "no")


def scores_table(result: dict) -> list[str]:
    """The criterion against the tau-free rule and the majority class, per subset."""
    lines = ["| subset | criterion | tau-free rule | majority class |", "| --- | --- | --- | --- |"]
    for key, label in SUBSETS.items():
        row = result["scores"].get(key)
        if row:
            lines.append(f"| {label} | {_score(row['criterion'])} | {_score(row['tau_free'])} | "
                         f"{_score(row['majority'])} |")
    return lines


def scan_lines(result: dict) -> list[str]:
    out = []
    for split, pieces in result.get("tau_scan", {}).items():
        cells = ", ".join(f"({_t(p['from'])}, {_t(p['to'])}): {p['right']}/{p['of']}"
                          for p in pieces)  # fmt: skip
        out.append(f"- {split}: {cells}")
    return out


def critical_lines(result: dict) -> list[str]:
    rows = result.get("critical") or []
    if not rows:
        return []
    lines = ["| setting | rates | predicted critical rate [over the tau interval] | observed "
             "(largest composing, smallest not) | within x2 |", "| --- | --- | --- | --- | --- |"]
    for c in rows:
        rng = c["predicted_range"] or [None, None]
        obs = c["observed"]
        seen = ("-" if obs is None else f"{_t(obs['critical'])} ({_t(obs['below'])}, "
                f"{_t(obs['above'])}){'' if obs['monotone'] else ', not monotone'}")
        lines.append(f"| {c['setting']} | {_t(min(c['rates']))} .. {_t(max(c['rates']))} | "
                     f"{_t(c['predicted'])} [{_t(rng[0])}, {_t(rng[1])}] | {seen} | "
                     f"{_yes(c['within_factor'])} |")
    return lines


def summary_markdown(result: dict) -> str:
    acc, n = result["accuracy"], result["counts"]
    pct = lambda a: "-" if a is None else f"{a:.0%}"  # noqa: E731
    lo, hi = result["tau_interval"]
    lines = [
        "# The race: does the memory lower the 1-var loss before the inputs do?",
        "",
        f"Criterion (docs/race.md): {result['criterion']}.",
        f"Tau-free rule: {result['tau_free_rule']}.",
        "",
        f"tau = {result['tau']:.3g} (fitted on the fit half; every tau in ({lo:.3g}, "
        f"{'inf' if hi is None else format(hi, '.3g')}) scores the same there). Accuracy: "
        f"**test {pct(acc['test'])}** of {n['test']}, fit {pct(acc['fit'])} of {n['fit']}, "
        f"new {pct(acc['new'])} of {n['new']}. The majority class is each "
        "subset's own commoner outcome (the better constant answer, known only afterwards).",
        "",
        *scores_table(result),
        "",
        "Accuracy at every tau of the fit-equivalent interval (pieces between the rows' "
        "T_mem / T_in):",
        *scan_lines(result),
        "",
        *critical_lines(result),
        "",
        "| configuration | split | known | T_mem | T_in | T_mem / (tau T_in) | winner | predicted "
        "| tau-free | composed (sustained / touched, of seeds) | 2-var >= 0.99 first at | right |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in result["configs"]:
        sz = c["step_zero"]
        done = c["composed"] is not None
        seen = (f"{_yes(c['composed'])} ({c['seeds_composed']} / {c['seeds_touched']} of "
                f"{c['seeds']})") if done else "not run"
        lines.append(
            f"| {c['name']} | {c['split']} | {'yes' if c['known_when_written'] else ''} | "
            f"{_t(sz['T_mem'])} | {_t(sz['T_in'])} | {_t(c['ratio'])} | {c['winner']} | "
            f"{_yes(c['predicted'])} | {_yes(c['tau_free'])} | {seen} | "
            f"{steps_text(c['emergence_steps']) if done else '-'} | "
            f"{'-' if not done else ('yes' if c['predicted'] == c['composed'] else '**no**')} |"
        )
    lines += [
        "",
        "T_mem, T_in in steps (inf: never). Composed: 2-var accuracy >= 0.99 on the whole 2-var "
        "population on every evaluation of the last fifth of the run (sustained), on the "
        "majority of the seeds (each seed: its own minibatch order and its own perturbation of "
        "W^0); touched: >= 0.99 at some evaluation.",
        "",
        f"Command: `{result['provenance']['command']}` at commit "
        f"{result['provenance']['commit']} ({result['provenance']['cpu']}). Wall time of this "
        f"invocation: {result['seconds']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def _clip(x, lo: float, hi: float) -> float:
    return hi if x is None or x > hi else max(x, lo)


def plot_race(result: dict):
    """x: T_mem / (tau T_in) (left of 1: the memory wins); y: T_mem / S (below 1: in
    budget); colour: the outcome; marker: the split; a cross: mispredicted."""
    fig, ax = plt.subplots(figsize=(10, 7), layout="constrained")
    lo, hi = 1e-4, 1e4
    for c in result["configs"]:
        sz = c["step_zero"]
        x = _clip(c["ratio"], lo, hi) if c["ratio"] != 0 else lo
        y = _clip(None if sz["T_mem"] is None else sz["T_mem"] / c["steps"], 1e-3, 1e3)
        colour = ("grey" if c["composed"] is None else
                  OKABE_ITO["blue"] if c["composed"] else OKABE_ITO["vermillion"])
        marker = {"fit": "o", "test": "s", "new": "^"}[c["split"]]
        ax.scatter(x, y, color=colour, marker=marker, s=60, zorder=3,
                   edgecolors="none")  # fmt: skip
        if c["composed"] is not None and c["predicted"] != c["composed"]:
            ax.scatter(x, y, color="black", marker="x", s=90, zorder=4)
        ax.annotate(c["name"], (x, y), fontsize=6.5, xytext=(4, 3), textcoords="offset points")
    ax.axvline(1, color="grey", ls="--", lw=1)
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set(xscale="log", yscale="log", xlim=(lo / 2, hi * 2), ylim=(5e-4, 2e3),
           xlabel="T_mem / (tau T_in)   (< 1: the memory wins the race; clipped at the edges)",
           ylabel="T_mem / S   (< 1: the memory composes within the run)",
           title=f"The race at step 0 (tau = {result['tau']:.3g}): each configuration, "
                 "coloured by its outcome")  # fmt: skip
    handles = [
        plt.Line2D([], [], color=OKABE_ITO["blue"], marker="o", ls="", label="composed"),
        plt.Line2D([], [], color=OKABE_ITO["vermillion"], marker="o", ls="",
                   label="not composed"),
        plt.Line2D([], [], color="grey", marker="o", ls="", label="fit half"),
        plt.Line2D([], [], color="grey", marker="s", ls="", label="test half"),
        plt.Line2D([], [], color="grey", marker="^", ls="", label="new test set (grey: not run)"),
        plt.Line2D([], [], color="black", marker="x", ls="", label="mispredicted"),
    ]  # fmt: skip
    ax.legend(handles=handles, loc="lower right", fontsize=9)
    return fig


def report(result: dict) -> Report:
    """race.json (infinite and NaN floats as null: "never", "none"), summary.md and the
    figure `race` (write_report's format)."""
    return Report({
        "race.json": Json(result, indent=1),
        "summary.md": summary_markdown(result),
        "race": Figure(lambda: plot_race(result)),
    })  # fmt: skip
