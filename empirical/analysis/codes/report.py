"""The codes' files, declared once (empirical.report.writer): for one run, codes.json,
summary.md and the figures codes_view, codes_probe, codes_timeline; over runs, the same names
for the summary by variant and codes_runs (docs/heads.md)."""

from __future__ import annotations

from empirical.analysis.codes.extract import TARGETS
from empirical.analysis.codes.plots import plot_probe, plot_runs, plot_timeline, plot_view
from empirical.analysis.codes.probe import GOAL, HELD_OUT_SETS
from empirical.report.tables import markdown_table, pct
from empirical.report.writer import Figure, Json, Report


def _p(x) -> str:
    return "-" if x is None else pct(x)


def _spread(st) -> str:
    if st is None:
        return "-"
    return f"{pct(st['median'])} [{pct(st['min'])}, {pct(st['max'])}]"


def run_markdown(r: dict) -> str:
    """summary.md of one run's codes."""
    probe, names = r["probe"], list(r["model_accuracy"])
    form = probe["form"]
    rows = [
        f"{n}{' *' if n in HELD_OUT_SETS else ''} | {_p(r['model_accuracy'][n])} | "
        + " | ".join(_p(probe[t]["probe"][n]) for t in TARGETS)
        + f" | {_p((form.get('initial_codes') or {}).get(n))} | {_p(form['shuffled_labels'][n])}"
        f" | {_p(form['majority'][n])} | {_p(form['input_layout'][n])}"
        f" | {_p(r['structure']['nearest_centroid'][n])}"
        for n in names
    ]
    goal = r["goal"]
    met = ("no held-out set where the model reaches it" if goal["met"] is None
           else ("met" if goal["met"] else "not met") + f" on {', '.join(goal['sets'])}")
    lines = [
        f"# Latent codes at `=`: {r['run']} ({r['variant']}, step {r['step'] or 'final'})", "",
        f"Codes: every layer's heads' attention weights from `=` to each key ({r['features']} "
        f"numbers per sequence). Probes trained on {r['n_train']} sequences of the trained "
        "forms, scored per evaluation set (* held-out compositions); form: which operands are "
        "variables (4 classes), n_vars (3), order: whether the first operand's number is "
        "assigned first (2-var sequences, 2 classes). Controls (form): the same probe on the "
        "step-0 snapshot's codes, with shuffled labels, the majority class, the input's token "
        "layout; nearest centroid: the training codes' form centroids. docs/heads.md.", "",
        *markdown_table("set | model | probe: form | probe: n_vars | probe: order | codes at "
                        "step 0 | shuffled labels | majority | input layout | nearest centroid",
                        rows),  # fmt: skip
        "",
        f"Goal (probe >= {pct(GOAL)} where the model is): {met}. Silhouette of the forms "
        f"(training and held-out codes): {_num(r['structure']['silhouette'])}.",
    ]
    tl = r.get("timeline")
    if tl:
        lines += ["", f"Over training ({len(tl['steps'])} snapshots): the codes appear (the "
                  f"probe's mean over the held-out sets >= {pct(GOAL)} from then on) at step "
                  f"{tl['appears_step']}; the run's first / second jump end at "
                  f"{r['phases'].get('first_spike')} / {r['phases'].get('second_spike')}."]
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def run_report(r: dict) -> Report:
    title = f"{r['variant']}, seed {r['seed']}"
    files = {"codes.json": Json(r, newline=True), "summary.md": run_markdown(r),
             "codes_view": Figure(lambda: plot_view(r, title)),
             "codes_probe": Figure(lambda: plot_probe(r, title))}  # fmt: skip
    if r.get("timeline"):
        files["codes_timeline"] = Figure(lambda: plot_timeline(r, title))
    return Report(files)


def runs_markdown(summary: dict, assoc: dict | None = None) -> str:
    """summary.md over runs, by variant (and, with `assoc`, the probe against the model over
    every run: run_codes.association)."""
    lines = ["# Latent codes at `=` over runs", "",
             "Per variant: median [min, max] over its runs; * held-out compositions; goal: "
             f"the form probe >= {pct(GOAL)} on every held-out set where the model is "
             "(runs where the model is on none are not counted). docs/heads.md.", ""]  # fmt: skip
    for name, v in summary.items():
        rows = [f"{s}{' *' if s in HELD_OUT_SETS else ''} | " + " | ".join(
                _spread(v["sets"][s][k]) for k in ("model", "probe", "initial_codes",
                                                   "shuffled_labels", "majority",
                                                   "nearest_centroid"))
                for s in v["sets"]]  # fmt: skip
        goal = v["goal"]
        lines += [f"## {name} ({goal['runs']} runs)", "",
                  *markdown_table("set | model | probe: form | codes at step 0 | shuffled "
                                  "labels | majority | nearest centroid", rows), "",
                  f"Goal met in {goal['met']} of {goal['of']} runs. Silhouette "
                  f"{_spread_num(v['silhouette'])}. Codes appear at steps {v['appears']}; "
                  f"first jumps end at {v['first_jump']}.", ""]  # fmt: skip
    if assoc:
        rows = [f"{s} | " + ("-" if a is None else f"{a['rho']:.2f} | {a['pvalue']:.2g} | "
                             f"{a['n']}") for s, a in assoc.items()]  # fmt: skip
        lines += ["## The codes against the model, over every run", "",
                  "Spearman's rank correlation of the form probe's accuracy on a held-out set "
                  "with the model's own accuracy there, every run of every variant a point.", "",
                  *markdown_table("set | rho | p | runs", rows), ""]  # fmt: skip
    return "\n".join(lines)


def _spread_num(st) -> str:
    if st is None:
        return "-"
    return f"{st['median']:.3f} [{st['min']:.3f}, {st['max']:.3f}]"


def runs_report(summary: dict, results: list[dict], assoc: dict | None = None) -> Report:
    data = {"variants": summary, "association": assoc, "runs": results}
    return Report({"codes.json": Json(data, newline=True),
                   "summary.md": runs_markdown(summary, assoc),
                   "codes_runs": Figure(lambda: plot_runs(
                       summary, "form probe on the codes at `=`, held-out compositions"))})
