"""summary.md of one run's analysis, written from analysis.json's content:
`text = summary_markdown(result)`, one function per section in the file's order; the
mechanism table's rows are the model analyses' own (empirical.analysis.model_analysis).
"""

from __future__ import annotations

from empirical.analysis.authors import SUFFIX
from empirical.analysis.model_analysis import fmt, mechanism_rows
from empirical.analysis.progress import MEASURE_NAMES, MEASURES
from empirical.report.tables import markdown_table

# the paper's phase (Appendix B) in which each measure completes
PAPER_PHASE = {
    "ov2_mlp2_accuracy": "1 (rises sharply first)",
    "probe_l1_var_from_num": "end of 1 / 2 (binding copied into numbers)",
    "qk1_num_to_prev_var": "1-2 (binding)",
    "attn_l1_num_to_prev": "1-2 (binding)",
    "qk2_ov1_var_identity": "2 (80-99%), 3 (complete)",
    "attn_l1_equal_to_operands": "2 (80-99%), 3 (complete)",
    "attn_l2_equal_to_values": "2 (80-99%), 3 (complete)",
}
NEVER = 10**12  # sorts a measure that never stays above its threshold last


def summary_markdown(result: dict) -> str:
    """summary.md's text from analysis.json's content `result`."""
    sections = (
        _header,
        _accuracy_section,
        _mechanism_section,
        _progress_section,
        _definition_agreement_section,
        _plateau_section,
        _first_spike_section,
        _second_spike_section,
        _second_operand_section,
        _figures_section,
    )
    lines = [line for section in sections for line in section(result)]
    lines.append(f"Analysis took {result.get('seconds', 0):.1f} s.")
    return "\n".join(lines) + "\n"


# -- formatting -----------------------------------------------------------------------------
def _yes_no(flag) -> str:
    return "yes" if flag else "no"


def _change(before, after, pct: bool = False) -> str:
    """'0.412 -> 0.871': a value before and after, as fmt writes them."""
    return f"{fmt(before, pct)} -> {fmt(after, pct)}"


def _phase_of(step: int | None, phases: dict | None) -> str:
    """The training phase (1, 2 or 3) at `step` from the detected spikes; "-" if unknown."""
    if step is None or phases is None:
        return "-"
    first, second = phases.get("first_spike"), phases.get("second_spike")
    if first is None or step < first["start_step"]:
        return "1"
    if second is None or step < second["start_step"]:
        return "2"
    return "3"


def _by_stable_step(names, crossings: dict) -> list[str]:
    """`names` in the order of the step from which each stays >= its threshold (never: last)."""
    return sorted(
        names,
        key=lambda n: crossings[n]["stable"] if crossings[n]["stable"] is not None else NEVER,
    )


# -- the model at this step -------------------------------------------------------------------
def _header(result: dict) -> list[str]:
    return [
        f"# Analysis of {result['run_dir']} at step {result['step']}",
        "",
        f"Checkpoint `{result['checkpoint']}`; probe data: {result['probe_data']['n_test']} "
        f"sequences, {result['probe_data']['distribution']}. Definitions: docs/analysis.md.",
        "",
    ]


def _accuracy_section(result: dict) -> list[str]:
    acc = result.get("accuracy_at_step")
    if not acc:
        return []
    ci = result.get("accuracy_at_step_ci95") or {}
    rows = []
    for k, v in acc.items():
        c = ci.get(k)
        interval = f"{100 * c['ci95'][0]:.1f}-{100 * c['ci95'][1]:.1f}%" if c else "-"
        rows.append(f"{k} | {fmt(v, True)} | {interval} | {c['n'] if c else '-'}")
    return [
        "## Accuracy at this step",
        "",
        "95% interval: Wilson score interval over the evaluation set's sequences "
        "(empirical.report.stats).",
        "",
        *markdown_table("set | accuracy | 95% interval | sequences", rows),
        "",
    ]


def _mechanism_section(result: dict) -> list[str]:
    """The model's analyses, one table: each declaration's rows (model_analysis), in order."""
    rows = [f"| {q} | {v} |" for q, v in mechanism_rows(result)]
    return ["## Section 5: the mechanism", "", "| quantity | value |", "| --- | --- |", *rows, ""]


# -- progress measures (Appendix B) -----------------------------------------------------------
def _detected_phases(phases: dict | None) -> list[str]:
    if not phases:
        return []
    fs, ss = phases.get("first_spike"), phases.get("second_spike")
    return [
        f"Detected phases (empirical.runs.phases): 0-var >= 90% at step "
        f"{phases.get('zero_var_learned_step')}; first spike "
        + (f"{fs['start_step']}-{fs['end_step']}" if fs else "none")
        + "; second spike "
        + (f"{ss['start_step']}-{ss['end_step']}" if ss else "none")
        + ". Phase 1 ends where the first spike starts, phase 3 starts with the second.",
        "",
    ]


def _measure_rows(result: dict, order: list[str], crossings: dict) -> list[str]:
    """One row per measure: its threshold, ours and the authors' value at this step, both
    crossings, the phase there and the paper's phase."""
    values = result["model"]["progress_measures"]
    phases = result.get("phases")

    def cross(name):
        c = crossings.get(name)
        if not c:
            return "-", None
        first, stable = c["first"], c["stable"]
        text = f"{first if first is not None else '-'} / {stable if stable is not None else '-'}"
        return text, stable

    lines = []
    for name in order:
        theirs = name + SUFFIX
        ours_text, ours_stable = cross(name)
        their_text, their_stable = cross(theirs)
        lines.append(
            f"{name} | {MEASURES[name][0]:g} | {fmt(values.get(name))} | "
            f"{fmt(values.get(theirs))} | {ours_text} | {their_text} | "
            f"{_phase_of(ours_stable, phases)} / {_phase_of(their_stable, phases)} | "
            f"{PAPER_PHASE[name]}"
        )
    return lines


def _order_of_events(dyn: dict) -> list[str]:
    crossings = dyn["crossings"]
    lines = []
    for label, names in (
        ("ours", list(MEASURE_NAMES)),
        ("authors'", [n + SUFFIX for n in MEASURE_NAMES if n + SUFFIX in crossings]),
    ):
        if not names:
            continue
        names = _by_stable_step(names, crossings)
        crossed = [n for n in names if crossings[n]["stable"] is not None]
        never = [n for n in names if crossings[n]["stable"] is None]
        text = (
            f"Order of events, {label} definitions (by the step from which each stays >= "
            "its threshold): "
        )
        text += " < ".join(crossed) if crossed else "no measure crossed its threshold"
        if crossed and never:
            text += "; never: " + ", ".join(never)
        lines += [text + ".", ""]
    return lines + [f"{len(dyn['steps'])} snapshots analysed in {dyn['seconds']:.1f} s.", ""]


def _progress_section(result: dict) -> list[str]:
    dyn = result.get("training_dynamics")
    lines = ["## Progress measures (Appendix B)", ""]
    lines += _detected_phases(result.get("phases"))
    lines += [
        "Each measure twice: ours (docs/analysis.md) and the authors' definition of it "
        "(`@authors`, their progress_measures.py; empirical.analysis.authors). first: the first "
        "snapshot at or above the threshold; stays: the first from which every later one is.",
        "",
    ]
    header = (
        "measure | threshold | ours at this step | authors' at this step | ours: first / "
        "stays >= from | authors': first / stays >= from | phase there (ours / authors') | "
        "paper's phase"
    )
    crossings = dyn["crossings"] if dyn else {}
    order = _by_stable_step(MEASURE_NAMES, crossings) if dyn else list(MEASURE_NAMES)
    lines += [*markdown_table(header, _measure_rows(result, order, crossings)), ""]
    return lines + (_order_of_events(dyn) if dyn else [])


def _definition_agreement_section(result: dict) -> list[str]:
    agree = result.get("definition_agreement")
    if not agree:
        return []
    rows = [
        f"{name} | {fmt(a['mean_abs_diff'])} | {fmt(a['max_abs_diff'])} "
        f"({a['max_at_step']}: {fmt(a['ours_there'])} / {fmt(a['theirs_there'])}) | "
        f"{fmt(a['share_diff_above_0.05'], True)}"
        for name, a in agree.items()
    ]
    header = "measure | mean abs difference | largest (step: ours / authors') | snapshots "
    header += "differing by > 0.05"
    title = "### Ours vs the authors' definitions over the snapshots"
    return [title, "", *markdown_table(header, rows), ""]


def _plateau_section(result: dict) -> list[str]:
    plateau = result.get("phase2_plateau")
    title = ["## Phase 2 plateau of the routing measures (Appendix B)", ""]
    if not plateau:
        if result.get("training_dynamics") and result.get("phases"):
            return title + [
                "Not measurable on this run: it needs both spikes detected and a snapshot "
                "between the end of the first and the start of the second.",
                "",
            ]
        return []
    rows = [
        f"{name} | {fmt(d['mean'], True)} | {fmt(d['min'], True)} | "
        f"{fmt(d['max'], True)} | {_yes_no(d['within_80_99'])} | "
        f"{_yes_no(d['mean_within_80_99'])}"
        for name, d in plateau["routing"].items()
    ]
    return title + [
        f"Over the {plateau['n_snapshots']} snapshots from step {plateau['start']} (end of the "
        f"first spike) to step {plateau['end']} (start of the second). The paper: these "
        "measures plateau between 80% and 99% in phase 2.",
        "",
        *markdown_table(
            "measure | mean | min | max | all within 80-99% | mean within 80-99%", rows
        ),
        "",
    ]


# -- the spikes -----------------------------------------------------------------------------

# the first spike's table: (label, key, format: 0 number, 1 percentage, 2 as is)
FIRST_SPIKE_ROWS = (
    ("layer-1 `=` attention on the variable operand", "l1_eq_on_variable_operand", 0),
    ("layer-1 `=` attention on the number operand", "l1_eq_on_number_operand", 0),
    ("share of sequences with more on the variable", "l1_eq_variable_above_number", 1),
    ("variable matrix ebar W_QK^2 ebar^T: diagonal rows", "identity_authors", 1),
    ("variable matrix: mean diagonal margin", "diag_margin_authors", 0),
    ("our identity score (with `=` and numbers)", "identity_ours", 1),
    ("accuracy on the 1-var probe sequences", "accuracy_1var", 1),
    ("prediction on the example", "example_prediction", 2),
)


def _first_spike_section(result: dict) -> list[str]:
    first = (result.get("spike_comparisons") or {}).get("first_spike")
    if not first:
        return []
    a, b = first["steps"]
    sa, sb = first["states"][str(a)], first["states"][str(b)]
    rows = []
    for label, key, kind in FIRST_SPIKE_ROWS:
        if kind == 2:
            rows.append(f"{label} | {sa[key]} | {sb[key]}")
        else:
            rows.append(f"{label} | {fmt(sa[key], bool(kind))} | {fmt(sb[key], bool(kind))}")
    return [
        f"## First spike, step {a} vs {b} (Figure 8: first_spike_steps)",
        "",
        f"Example: `{first['example']['text']}` (answer {first['example']['answer']}); "
        f"means over {sa['n_1var']} 1-var probe sequences.",
        "",
        *markdown_table(f"quantity | step {a} | step {b}", rows),
        "",
    ]


def _operand_attention_cell(x: dict | None, y: dict | None) -> str:
    """One variable at one operand position, before -> after: layer-1 attention on it / share
    below 1/4 / layer-2 attention on its number / accuracy."""
    if x is None or y is None:
        return "-"
    keys = (("l1_eq_attention", False), ("share_below_quarter", True))
    keys += (("l2_eq_on_value", False), ("accuracy", True))
    return " / ".join(_change(x[k], y[k], pct) for k, pct in keys) + f" (n {x['n']})"


def _operand_attention_table(oa: dict, ob: dict, a: int, b: int) -> list[str]:
    rows = []
    for v in sorted(oa["first"].keys() | oa["second"].keys()):
        first, second = (
            _operand_attention_cell(oa[side].get(v), ob[side].get(v))
            for side in ("first", "second")
        )
        rows.append(f"{v} | {first} | {second}")
    return [
        "`=` on a variable operand, by variable and operand position, over the probe "
        f"sequences, step {a} -> {b}: layer-1 attention on it / share of sequences "
        "where that is below 1/4 (what fails attn_l1_equal_to_operands) / layer-2 "
        "attention on its assigned number / accuracy:",
        "",
        *markdown_table("variable | as first operand (L-3) | as second operand (L-2)", rows),
        "",
    ]


def _changes(before: dict, after: dict) -> str:
    """A variable as the second operand, before -> after: layer-1 `=` attention on L-2 |
    layer-2 `=` attention on its number | accuracy."""
    keys = ("l1_eq_to_second", "l2_eq_to_second_value", "accuracy")
    return " | ".join(_change(before[k], after[k], k == "accuracy") for k in keys)


def _second_spike_section(result: dict) -> list[str]:
    second = (result.get("spike_comparisons") or {}).get("second_spike")
    if not second:
        return []
    a, b = second["steps"]
    sa, sb = second["states"][str(a)], second["states"][str(b)]
    r2 = set(second["restricted"])
    lines = [
        f"## Second spike, step {a} vs {b} (Figures 9c / 9d: second_spike_steps)",
        "",
        "Per variable as the second operand (position L-2): layer-1 `=` attention on L-2 "
        "(9c), layer-2 `=` attention on its assigned number (9d), accuracy.",
        "",
    ]
    rows = []
    for v, pa in sa["per_variable"].items():
        pb = sb["per_variable"].get(v)
        if pb is not None:
            rows.append(f"{v} | {_yes_no(v in r2)} | " + _changes(pa, pb))
    header = "variable | never 2nd in training | layer-1 `=`->L-2 | layer-2 `=`->its number"
    lines += [*markdown_table(header + " | accuracy", rows), ""]
    oa, ob = sa.get("operand_attention"), sb.get("operand_attention")
    if oa and ob:
        lines += _operand_attention_table(oa, ob, a, b)
    return lines


def _second_operand_section(result: dict) -> list[str]:
    dyn = result.get("training_dynamics")
    if not dyn:
        return []
    r2 = set(result["task"]["r2"])
    rows = [
        f"{letter} | {_yes_no(letter in r2)} | "
        + _changes({k: v[0] for k, v in sp.items()}, {k: v[-1] for k, v in sp.items()})
        for letter, sp in dyn["second_spike"].items()
    ]
    header = "variable at L-2 | never 2nd in training | layer-1 `=`->L-2 | layer-2 `=`->its value"
    return [
        "## Second operand by variable (Figure 9), first / last snapshot",
        "",
        *markdown_table(header + " | accuracy", rows),
        "",
    ]


def _figures_section(result: dict) -> list[str]:
    if not result.get("figures"):
        return []
    return ["## Figures", ""] + [f"- [{f}]({f})" for f in result["figures"]] + [""]
