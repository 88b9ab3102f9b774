"""The analyses of one model (paper Section 5, and the progress measures at it), each declared
once in `MODEL_ANALYSES`: its name, the function computing it from the model and the probe
data, its entries in analysis.json's "model" part, its rows of summary.md's mechanism table
and its figures. `analyze_model`, the summary (markdown_summary) and the figures of
`analyze_run` (run_analysis) iterate over the declarations, in their order; a new analysis is
its function (its own module) and its declaration here.

    numbers, raw = analyze_model(model, task, data)   # numbers: analysis.json's "model" part
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from empirical.analysis.attention import attention_examples, attention_summary
from empirical.analysis.common import to_jsonable
from empirical.analysis.fourier import fourier_analysis
from empirical.analysis.ov_mlp import isolated_ov_mlp, ov_mlp_cosine, same_addition_cosine
from empirical.analysis.plots.mechanism import (
    plot_attention_examples,
    plot_fourier_neuron,
    plot_fourier_spectrum,
    plot_ov_mlp_cosine,
    plot_probes_and_circuit,
)
from empirical.analysis.plots.qk_scores import (
    plot_qk1_embeddings,
    plot_qk1_positional,
    plot_qk2_identity,
)
from empirical.analysis.probe_data import ProbeData
from empirical.analysis.probes import answer_probes
from empirical.analysis.progress import progress_measures
from empirical.analysis.qk import qk1_embedding_scores, qk1_positional_preference, qk2_ov1_identity
from empirical.model.circuits import ov_applies
from empirical.report.stats import accuracy_interval, correct_count, format_accuracy
from empirical.task.config import TaskConfig

__all__ = ["MODEL_ANALYSES", "ModelAnalysis", "Subject", "analyze_model", "fmt", "fmt_ci",
           "mechanism_rows", "model_figures", "probes_title"]  # fmt: skip


@dataclass(frozen=True)
class Subject:
    """What an analysis of one model reads."""

    model: Any
    task: TaskConfig
    data: ProbeData
    held_out: Any = None  # the run's held-out pairs (None: none)
    seed: int = 0


@dataclass(frozen=True)
class Titles:
    """What a figure's title names: the run and step (`tag`), and the task."""

    tag: str
    task: TaskConfig


@dataclass(frozen=True)
class ModelAnalysis:
    """One analysis of a model, declared once.

    name: its key in `raw` and in analysis.json's `model.timings_s`. compute(subject): its
    result. json(raw): its entries of analysis.json's "model" part, from `raw` (every result
    so far, by name). rows(result): its rows (quantity, value) of summary.md's mechanism
    table, from analysis.json's content. figures: file stem -> draw(raw, titles) -> Figure.
    applies(model config): None, or why it does not apply to such a model (it is then not
    computed: analysis.json's `not_applicable` and summary.md say why). needs: the other
    analyses its figures read (drawn only where they were computed).
    """

    name: str
    compute: Callable[[Subject], Any]
    json: Callable[[dict], dict] = lambda raw: {}
    rows: Callable[[dict], list[tuple[str, str]]] = lambda result: []
    figures: dict[str, Callable[[dict, Titles], Any]] = field(default_factory=dict)
    applies: Callable[[Any], str | None] = lambda cfg: None
    needs: tuple[str, ...] = ()


# -- summary formats --------------------------------------------------------------------------
def fmt(x, pct: bool = False) -> str:
    """A number in summary.md: 3 decimals, or a percentage; "-" for none."""
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def fmt_ci(acc, n: int | None) -> str:
    """'97.2% [95.3, 98.3]': an accuracy over n sequences with its 95% Wilson interval."""
    if acc is None or not n:
        return fmt(acc, True)
    return format_accuracy(acc, accuracy_interval(correct_count(acc, n), n))


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def probes_title(accuracy: float, p: int, tag: str) -> str:
    """The probes figure's title: what is plotted, and a verdict on the sum computed from the
    isolated OV-MLP circuit's measured accuracy (never asserted where it is not reached)."""
    what = f"Linear probes and the isolated layer-2 OV-MLP circuit ({tag})"
    right = f"the circuit alone gets the sum right on {100 * accuracy:.1f}% of all {p}x{p} pairs"
    if accuracy >= 0.99:
        return f"{what}\n{right}"
    return f"{what}\n{right}: not the sum of every pair (>= 99% not reached)"


# -- what each analysis writes into summary.md ------------------------------------------------
def _attention_rows(result: dict) -> list[tuple[str, str]]:
    att = result["model"]["attention"]["summary"]
    rows = []
    for k in ("0var", "1var", "2var"):
        if k in att:
            d = att[k]
            var = d.get("l1_eq_to_variable_operands")
            rows.append((
                f"`=` attention, {k}: layer 1 on positions L-3, L-2 (on variable operands) / "
                "layer 2 on the value positions",
                fmt(d["l1_eq_to_operand_positions"]) + (f" ({fmt(var)})" if var is not None else "")
                + f" / {fmt(d['l2_eq_to_value_positions'])}",
            ))  # fmt: skip
    heads = att.get("by_head")
    if heads:  # several heads: the rows above read their mean pattern; each head's, 1-var
        kind = "1var" if "1var" in heads[0] else next(k for k in heads[0] if k.endswith("var"))
        each = ", ".join(f"h{h} {fmt(d[kind]['l1_eq_to_operand_positions'])} / "
                         f"{fmt(d[kind]['l2_eq_to_value_positions'])}"
                         for h, d in enumerate(heads))  # fmt: skip
        rows = [(q.replace("`=` attention", "`=` attention (mean of the heads)"), v)
                for q, v in rows]  # fmt: skip
        rows.append((f"`=` attention per head, {kind}: layer 1 on L-3, L-2 / layer 2 on the "
                     "value positions", each))  # fmt: skip
    return rows


def _heads_mean(examples: list[dict]) -> str:
    """', the mean of its n heads' where the examples' patterns are a mean over heads."""
    by_head = examples[0].get("pattern_by_head") if examples else None
    return "" if by_head is None else f"; the mean of its {by_head.shape[1]} heads"


def _head_note(d: dict) -> str:
    """' (head h of its n)' for an analysis of one head chosen among several, else ''."""
    if "head" not in d:
        return ""
    n = len(next(iter(d["by_head"].values())))
    return f" (head {d['head']}, the best of {n})"


def _cosine_rows(result: dict) -> list[tuple[str, str]]:
    return [
        (f"cos(MLP input, OV(W_E[x] + W_E[y])), {k}: matched / shuffled",
         f"{fmt(d['matched']['mean'])} / {fmt(d['shuffled']['mean'])}")
        for k, d in result["model"]["ov_mlp_cosine"]["by_kind"].items()
    ]  # fmt: skip


def _same_rows(result: dict) -> list[tuple[str, str]]:
    same = result["model"]["same_addition_cosine"]
    return [("same addition, variable vs direct form: matched / mismatched cosine",
             f"{fmt(same['matched']['mean'])} / {fmt(same['mismatched']['mean'])}")]  # fmt: skip


def _probe_rows(result: dict) -> list[tuple[str, str]]:
    """The answer probes, then the isolated circuit they are plotted with (probes.png)."""
    pr, iso = result["model"]["answer_probes"], result["model"].get("isolated_ov_mlp")
    n = result["probe_data"]["n_test"]
    return [
        ("answer probe before the MLP (resid_mid), held-out accuracy [95% interval]",
         fmt_ci(pr["resid_mid"]["test_acc"], n)),
        ("answer probe after the MLP (resid_post), held-out accuracy (model itself)",
         f"{fmt_ci(pr['resid_post']['test_acc'], n)} ({fmt_ci(pr['model_test_acc'], n)})"),
    ] + ([("isolated OV-MLP circuit, all p^2 pairs",
           f"{fmt(iso['accuracy'], True)} (MLP only: {fmt(iso['accuracy_mlp_only'], True)})")]
         if iso else [])  # fmt: skip


def _fourier_rows(result: dict) -> list[tuple[str, str]]:
    four = result["model"]["fourier"]
    return [
        ("MLP neurons: mean R^2 of Gromov fit (active) / share R^2 >= 0.9",
         f"{fmt(four['r2_mean_active'])} / {fmt(four['frac_r2_above_0.9'], True)}"),
        ("key frequencies (dominant for >= 5% of well-fitted neurons)",
         f"{four['key_frequencies']}"),
        ("best neuron (Figure 11): index, frequency, R^2",
         f"{four['best_neuron']}, {four['best_neuron_freq']}, {fmt(four['best_neuron_r2'])}"),
    ]  # fmt: skip


def _qk1_rows(result: dict) -> list[tuple[str, str]]:
    qk1 = result["model"]["qk1_embeddings"]
    return [
        ("layer 1: `=` prefers positions" + _head_note(qk1), f"{qk1['eq_top2_positions']}"),
        ("layer 1 (Fig. 6): numbers -> variables, mean score gap over other tokens / share of "
         "numbers whose top key token is a variable",
         f"{fmt(qk1.get('num_to_var_gap'))} / {fmt(qk1.get('num_top_key_is_var'), True)}"),
        ("layer 1 (Fig. 6): positions 0..L-5 -> variables, gap / share top key a variable",
         f"{fmt(qk1.get('pos_to_var_gap'))} / {fmt(qk1.get('pos_top_key_is_var'), True)}"),
        ("layer 1 (Fig. 6): position x position rises to the right, rank correlation with the "
         "key position (queries 2..L-5 / all)",
         f"{fmt(qk1.get('pos_pos_rank_corr_region'))} / {fmt(qk1.get('pos_pos_rank_corr'))}"),
    ]  # fmt: skip


def _preference_rows(result: dict) -> list[tuple[str, str]]:
    pref = result["model"]["qk1_positional_preference"]
    return [("layer 1: numbers prefer the previous position (Fig. 7a)" + _head_note(pref),
             fmt(pref["fraction"], True))]  # fmt: skip


def _identity_rows(result: dict) -> list[tuple[str, str]]:
    ident = result["model"]["qk2_ov1_identity"]
    return [("layer 2 QK on OV'd variables: identity score / mean margin (Fig. 7b)"
             + _head_note(ident),
             f"{fmt(ident['identity_score'])} / {fmt(ident['margin_mean'])}")]  # fmt: skip


# -- the figures ------------------------------------------------------------------------------
def _fourier_figures() -> dict[str, Callable[[dict, Titles], Any]]:
    def neuron(raw, t):
        four = raw["fourier"]
        r2_model = four["summary"].get("best_neuron_r2_full_model")
        title = f"Fourier features ({t.tag})"
        return plot_fourier_neuron(four["fit"], four["model_pre"], None, title, r2_model=r2_model)

    def spectrum(raw, t):
        title = f"Layer-2 MLP neurons vs Gromov's form ({t.tag})"
        return plot_fourier_spectrum(raw["fourier"]["fit"], None, title)

    return {"fourier_neuron": neuron, "fourier_spectrum": spectrum}


# -- the declarations, in analysis.json's order -------------------------------------------------
MODEL_ANALYSES: tuple[ModelAnalysis, ...] = (
    ModelAnalysis(
        "attention_examples",  # Figure 4
        lambda s: attention_examples(s.model, s.task, s.data.test),
        figures={"attention_patterns": lambda raw, t: plot_attention_examples(
            raw["attention_examples"], None,
            f"Attention patterns ({t.tag}{_heads_mean(raw['attention_examples'])})")},
    ),
    ModelAnalysis(
        "attention_summary",
        lambda s: attention_summary(s.model, s.task, s.data.test),
        json=lambda raw: {"attention": {
            "examples": [_without(e, "tokens") for e in raw["attention_examples"]],
            "summary": raw["attention_summary"]}},
        rows=_attention_rows,
    ),
    ModelAnalysis(
        "ov_mlp_cosine",  # Figure 5 (and 5a, drawn with it)
        lambda s: ov_mlp_cosine(s.model, s.task, s.data.test, seed=s.seed),
        json=lambda raw: {"ov_mlp_cosine": _without(raw["ov_mlp_cosine"], "samples")},
        rows=_cosine_rows,
        figures={"ov_mlp_cosine": lambda raw, t: plot_ov_mlp_cosine(
            raw["ov_mlp_cosine"], raw["same_addition_cosine"], None, f"OV-MLP circuit ({t.tag})")},
        applies=ov_applies,
    ),
    ModelAnalysis(
        "same_addition_cosine",  # Figure 5a
        lambda s: same_addition_cosine(s.model, s.task, s.data.test, seed=s.seed),
        json=lambda raw: {"same_addition_cosine": _without(raw["same_addition_cosine"], "samples")},
        rows=_same_rows,
    ),
    ModelAnalysis(
        "isolated_ov_mlp",
        lambda s: isolated_ov_mlp(s.model, s.task, s.held_out),
        json=lambda raw: {"isolated_ov_mlp": _without(raw["isolated_ov_mlp"], "correct")},
        applies=ov_applies,
    ),
    ModelAnalysis(
        "answer_probes",
        lambda s: answer_probes(s.model, s.task, s.data.train, s.data.test),
        json=lambda raw: {"answer_probes": raw["answer_probes"]},
        rows=_probe_rows,
        figures={"probes": lambda raw, t: plot_probes_and_circuit(
            raw["answer_probes"], raw["isolated_ov_mlp"], t.task.p, None,
            probes_title(raw["isolated_ov_mlp"]["accuracy"], t.task.p, t.tag))},
        needs=("isolated_ov_mlp",),
    ),
    ModelAnalysis(
        "fourier",  # Figure 11
        lambda s: fourier_analysis(s.model, s.task, _zero_var_prefix(s.data)),
        json=lambda raw: {"fourier": {**raw["fourier"]["summary"],
                                      "per_neuron_r2": raw["fourier"]["fit"].r2,
                                      "per_neuron_freq": raw["fourier"]["fit"].freq}},
        rows=_fourier_rows,
        figures=_fourier_figures(),
        applies=ov_applies,
    ),
    ModelAnalysis(
        "qk1_embedding_scores",  # Figure 6
        lambda s: qk1_embedding_scores(s.model, s.task),
        json=lambda raw: {"qk1_embeddings": _without(raw["qk1_embedding_scores"], "scores")
                          | {"scores": raw["qk1_embedding_scores"]["scores"]}},
        rows=_qk1_rows,
        figures={"qk1_embeddings": lambda raw, t: plot_qk1_embeddings(
            raw["qk1_embedding_scores"], None, f"Layer-1 QK on embeddings ({t.tag})")},
    ),
    ModelAnalysis(
        "qk1_positional_preference",  # Figure 7a
        lambda s: qk1_positional_preference(s.model, s.task),
        json=lambda raw: {"qk1_positional_preference": raw["qk1_positional_preference"]},
        rows=_preference_rows,
        figures={"qk1_positional": lambda raw, t: plot_qk1_positional(
            raw["qk1_positional_preference"], None,
            f"Numbers' positional preference in layer 1 ({t.tag})")},
    ),
    ModelAnalysis(
        "qk2_ov1_identity",  # Figure 7b
        lambda s: qk2_ov1_identity(s.model, s.task),
        json=lambda raw: {"qk2_ov1_identity": raw["qk2_ov1_identity"]},
        rows=_identity_rows,
        figures={"qk2_ov1_identity": lambda raw, t: plot_qk2_identity(
            raw["qk2_ov1_identity"], None, t.tag)},
        applies=ov_applies,
    ),
    ModelAnalysis(
        "progress_measures",  # Appendix B at this step (summary.md: the progress section)
        lambda s: progress_measures(s.model, s.data, with_second_spike=True),
        json=lambda raw: {"progress_measures": raw["progress_measures"][0],
                          "second_spike_scores": raw["progress_measures"][1]},
    ),
)  # fmt: skip


def _zero_var_prefix(data: ProbeData):
    """A 0-var probe sequence (the full model's Fourier grid is read on it), None if none."""
    zero = data.test[data.test.n_vars == 0]
    return zero.tokens[0] if len(zero) else None


def analyze_model(model, task: TaskConfig, data: ProbeData, held_out=None, seed: int = 0):
    """Every declared analysis of one model. Returns (numbers, raw): `numbers` is JSON-ready
    (analysis.json's "model" part, with each analysis's time in `timings_s`), `raw` each
    analysis's result by name (what the figures draw)."""
    model.eval()
    subject = Subject(model, task, data, held_out, seed)
    raw, timings, skipped = {}, {}, {}
    for analysis in MODEL_ANALYSES:
        reason = analysis.applies(model.cfg)
        if reason:
            skipped[analysis.name] = reason
            continue
        t0 = time.perf_counter()
        raw[analysis.name] = analysis.compute(subject)
        timings[analysis.name] = time.perf_counter() - t0
    numbers = {key: value for a in MODEL_ANALYSES if a.name in raw
               for key, value in a.json(raw).items()}  # fmt: skip
    extra = {"not_applicable": skipped} if skipped else {}
    return to_jsonable(numbers | extra | {"timings_s": timings}), raw


def mechanism_rows(result: dict) -> list[tuple[str, str]]:
    """summary.md's mechanism table from analysis.json's content: each computed analysis's
    rows, then one row per analysis that does not apply to this model (and why)."""
    model = result["model"]
    skipped = model.get("not_applicable", {})
    rows = [row for a in MODEL_ANALYSES if a.name not in skipped for row in a.rows(result)]
    return rows + [(f"{name}: not computed", why) for name, why in skipped.items()]


def model_figures(raw: dict, task: TaskConfig, tag: str) -> dict[str, Callable[[], Any]]:
    """Every declared figure of one model: file stem -> draw() (titled with `tag`: the run
    and the step)."""
    titles = Titles(tag, task)
    return {stem: (lambda draw=draw: draw(raw, titles))
            for a in MODEL_ANALYSES if a.name in raw and all(n in raw for n in a.needs)
            for stem, draw in a.figures.items()}  # fmt: skip
