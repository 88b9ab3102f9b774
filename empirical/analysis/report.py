"""All analyses of one run: numbers in analysis.json, figures, and a markdown summary.

    result = analyze_run("runs/paper/seed0")            # final checkpoint + every snapshot
    result = analyze_run(run_dir, step=5000)            # another snapshot
    numbers, raw = analyze_model(model, task, data)     # the Section-5 analyses of one model

Output directory (default RUN_DIR/analysis, or RUN_DIR/analysis/step_XXXXXX with `step`):
    analysis.json            every number (see docs/analysis.md)
    summary.md               the headline numbers, the progress-measure crossings and phases
    figures (png by default; `fmt` / --format pdf or svg):
    attention_patterns.png   Figure 4      ov_mlp_cosine.png        Figures 5, 5a
    probes.png               probes, isolated OV-MLP circuit
    fourier_neuron.png       Figure 11     fourier_spectrum.png     R^2, key frequencies
    qk1_embeddings.png       Figure 6      qk1_positional.png       Figure 7a
    qk2_ov1_identity.png     Figure 7b
    progress_measures.png    Figure 12 (ours and the authors' definitions)
    second_spike.png         Figure 9 over training
    first_spike_steps.png    Figure 8: before / after the first spike (two snapshots)
    second_spike_steps.png   Figures 9c / 9d: before / after the second spike
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from empirical.analysis import plots
from empirical.analysis.attention import attention_examples, attention_summary
from empirical.analysis.authors import SUFFIX
from empirical.analysis.common import torch_threads
from empirical.analysis.fourier import fourier_analysis
from empirical.analysis.ov_mlp import isolated_ov_mlp, ov_mlp_cosine, same_addition_cosine
from empirical.analysis.probe_data import ProbeData, make_probe_data
from empirical.analysis.probes import answer_probes
from empirical.analysis.progress import (
    ALL_MEASURES,
    MEASURE_NAMES,
    MEASURES,
    ROUTING_MEASURES,
    ProgressHistory,
    definition_agreement,
    progress_measures,
    progress_over_training,
    window_levels,
)
from empirical.analysis.qk import qk1_embedding_scores, qk1_positional_preference, qk2_ov1_identity
from empirical.analysis.spikes import (
    compare_first_spike,
    compare_second_spike,
    comparison_numbers,
    default_compare_steps,
)
from empirical.config_io import atomic_write_bytes
from empirical.figures import saved_name
from empirical.rundir import RunDir, RunDirError
from empirical.task import TaskConfig, Vocabulary

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


def to_jsonable(obj, digits: int = 6):
    """Tensors / arrays -> nested lists, floats rounded to `digits` significant digits,
    NaN / inf -> None."""
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy()
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, digits) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return float(f"{x:.{digits}g}")
    return obj


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def analyze_model(model, task: TaskConfig, data: ProbeData, held_out=None, seed: int = 0):
    """The Section-5 analyses of one model. Returns (numbers, raw): `numbers` is JSON-ready
    (analysis.json's "model" part), `raw` holds what the figures need."""
    model.eval()
    timings = {}

    def timed(name, fn, *args, **kw):
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        timings[name] = time.perf_counter() - t0
        return out

    test, train = data.test, data.train
    zero = test[test.n_vars == 0]
    prefix = zero.tokens[0] if len(zero) else None
    examples = timed("attention_examples", attention_examples, model, task, test)
    attn = timed("attention_summary", attention_summary, model, task, test)
    cos = timed("ov_mlp_cosine", ov_mlp_cosine, model, task, test, seed=seed)
    same = timed("same_addition_cosine", same_addition_cosine, model, task, test, seed=seed)
    iso = timed("isolated_ov_mlp", isolated_ov_mlp, model, task, held_out)
    probes = timed("answer_probes", answer_probes, model, task, train, test)
    four = timed("fourier", fourier_analysis, model, task, prefix)
    qk1 = timed("qk1_embedding_scores", qk1_embedding_scores, model, task)
    pref = timed("qk1_positional_preference", qk1_positional_preference, model, task)
    ident = timed("qk2_ov1_identity", qk2_ov1_identity, model, task)
    measures, spike = timed(
        "progress_measures", progress_measures, model, data, with_second_spike=True
    )
    fit = four["fit"]
    numbers = {
        "attention": {
            "examples": [_without(e, "tokens") for e in examples],
            "summary": attn,
        },
        "ov_mlp_cosine": _without(cos, "samples"),
        "same_addition_cosine": _without(same, "samples"),
        "isolated_ov_mlp": _without(iso, "correct"),
        "answer_probes": probes,
        "fourier": {
            **four["summary"],
            "per_neuron_r2": fit.r2,
            "per_neuron_freq": fit.freq,
        },
        "qk1_embeddings": _without(qk1, "scores") | {"scores": qk1["scores"]},
        "qk1_positional_preference": pref,
        "qk2_ov1_identity": ident,
        "progress_measures": measures,
        "second_spike_scores": spike,
        "timings_s": timings,
    }
    raw = {
        "examples": examples,
        "cos": cos,
        "same": same,
        "isolated": iso,
        "probes": probes,
        "fourier": four,
        "qk1": qk1,
        "pref": pref,
        "ident": ident,
    }
    return to_jsonable(numbers), raw


def _load_target(run_dir: RunDir, step: int | None):
    from empirical.model import load_checkpoint, model_from_checkpoint

    path = run_dir.model_path(step)
    ckpt = load_checkpoint(path)
    run_dir.check_model_file(ckpt, path)  # not another run's weights
    model = model_from_checkpoint(ckpt, path)
    found = ckpt.get("step", step)
    return model, (int(found) if found is not None else None), path


def analyze_run(
    run_dir: str | Path,
    step: int | None = None,
    out_dir: str | Path | None = None,
    dynamics: bool = True,
    every: int = 1,
    n_probe: int = 2048,
    seed: int | None = None,
    threads: int | None = 1,
    progress: bool = False,
    figures: bool = True,
    fmt: str = "png",
    first_spike_steps: str | tuple[int, int] | None = "auto",
    second_spike_steps: str | tuple[int, int] | None = "auto",
    example: str | None = None,
) -> dict:
    """Analyse the run in `run_dir` (final checkpoint, or the snapshot at `step`) and, with
    `dynamics`, every `every`-th snapshot; write analysis.json, summary.md and the figures
    (`fmt`: png, pdf or svg) to `out_dir`. Returns the analysis.json content.

    `first_spike_steps` / `second_spike_steps`: the two snapshots compared around each spike
    (Figure 8, Figures 9c / 9d): (A, B), "auto" (from the detected phases, when snapshots
    bracket the spike) or None (skip). `example`: the Figure-8 sequence in token form."""
    from empirical.train.phases import detect_phases

    run_dir = RunDir(run_dir).require_run()
    cfg = run_dir.read_two_layer_config("analyze")
    task = cfg.task
    seed = cfg.seed if seed is None else seed
    out_dir = Path(run_dir.analysis_dir(step) if out_dir is None else out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with torch_threads(threads):
        model, model_step, model_path = _load_target(run_dir, step)
        held, set_sizes = None, {}
        eval_sets = run_dir.read_eval_sets(cfg)  # checked to be this run's (None: absent)
        if eval_sets is not None:
            held = eval_sets.held_out
            set_sizes = {name: len(batch) for name, batch in eval_sets.items()}
        records = run_dir.read_metrics()  # checked (a bad line: an error) before the work
        phases = detect_phases(records) if records else None
        # the compared steps and the example are checked before the work too
        compare = _spike_steps(run_dir, phases, records, first_spike_steps, second_spike_steps)
        if example:
            Vocabulary.from_config(task).encode(example)
        data = make_probe_data(task, seed, n=n_probe)
        numbers, raw = analyze_model(model, task, data, held, seed)
        history = None
        if dynamics and run_dir.snapshots():
            history = progress_over_training(run_dir.path, data, every=every, progress=progress)
        plateau = phase2_levels(history, phases)
        first_cmp = second_cmp = None
        if compare["first_spike"]:
            first_cmp = compare_first_spike(run_dir, data, compare["first_spike"], example)
        if compare["second_spike"]:
            second_cmp = compare_second_spike(run_dir, data, compare["second_spike"])
        result = {
            "run_dir": str(run_dir.path),
            "checkpoint": str(model_path),
            "step": model_step,
            "seed": seed,
            "task": {"p": task.p, "K": task.K, "L": task.L, "r1": task.r1, "r2": task.r2},
            "probe_data": {
                "distribution": "unrestricted (every variable at both operand positions, no "
                "held-out pairs), equal thirds of 0/1/2-var",
                "n_test": len(data.test),
                "n_train": len(data.train),
                "n_second_operand": len(data.second),
                "authors_batches": None
                if data.authors is None
                else {
                    "distribution": "the authors' measure batches: unrestricted, a third 0-var, "
                    "two thirds 1-var (variable first or second equally), no 2-var",
                    "n_eval": len(data.authors.eval),
                    "n_probe_train": len(data.authors.train),
                    "n_probe_test": len(data.authors.test),
                },
            },
            "model": numbers,
            "accuracy_at_step": _acc_at(records, model_step),
            "accuracy_at_step_ci95": _acc_intervals(_acc_at(records, model_step), set_sizes),
            "phases": phases.to_dict() if phases is not None else None,
            "measures": {
                name: {"threshold": t, "definition": d} for name, (t, d) in ALL_MEASURES.items()
            },
            "training_dynamics": to_jsonable(history.to_dict()) if history else None,
            "phase2_plateau": to_jsonable(plateau),
            "definition_agreement": to_jsonable(definition_agreement(history)) if history else None,
            "spike_comparisons": {
                "steps": compare,
                "first_spike": to_jsonable(comparison_numbers(first_cmp)),
                "second_spike": to_jsonable(comparison_numbers(second_cmp)),
            },
        }
        if figures:
            label = run_dir.label(cfg)
            result["figures"] = _figures(
                out_dir, cfg, model_step, raw, history, records, phases, fmt, label
            )
            result["figures"] += _spike_figures(out_dir, cfg, first_cmp, second_cmp, fmt, label)
    result["seconds"] = round(time.perf_counter() - t_start, 2)
    atomic_write_bytes(out_dir / RunDir.ANALYSIS_JSON, json.dumps(result, indent=1).encode())
    atomic_write_bytes(out_dir / RunDir.SUMMARY_MD, summary_markdown(result).encode())
    return result


def phase2_levels(history: ProgressHistory | None, phases) -> dict | None:
    """Every measure's mean / min / max over the snapshots of phase 2, between the two spikes
    (from the end of the first spike's window to the start of the second's), and whether
    each routing measure (ROUTING_MEASURES, ours and the authors') stays within the paper's
    80-99% there. None without both spikes or without a snapshot between them."""
    if history is None or phases is None:
        return None
    first, second = phases.first_spike, phases.second_spike
    if first is None or second is None:
        return None
    levels = window_levels(history, first.end_step, second.start_step)
    if not levels:
        return None
    levels["routing"] = {}
    for base in ROUTING_MEASURES:
        for name in (base, base + SUFFIX):
            m = levels["measures"].get(name)
            if m is not None:
                levels["routing"][name] = {
                    **m,
                    "within_80_99": bool(0.8 <= m["min"] and m["max"] <= 0.99),
                    "mean_within_80_99": bool(0.8 <= m["mean"] <= 0.99),
                }
    return levels


def _spike_steps(run_dir: RunDir, phases, records, first, second) -> dict:
    """The two snapshots compared around each spike (see `analyze_run`)."""
    snaps = run_dir.snapshot_steps()
    auto = default_compare_steps(phases, snaps, records)
    out = {}
    for key, given in (("first_spike", first), ("second_spike", second)):
        if given == "auto":
            out[key] = auto[key]
        elif given is None:
            out[key] = None
        else:
            a, b = (int(x) for x in given)
            missing = [s for s in (a, b) if s not in snaps]
            if missing:
                raise RunDirError(
                    f"{run_dir}: no snapshot for step {missing[0]} ({key.replace('_', ' ')} "
                    f"comparison); snapshots: {snaps[:4]}...{snaps[-3:]}"
                )
            out[key] = (a, b)
    return out


def _spike_figures(out_dir: Path, cfg, first_cmp, second_cmp, fmt: str, label: str) -> list[str]:
    made = []
    tag = label
    if first_cmp is not None:
        a, b = first_cmp["steps"]
        made.append(
            plots.plot_first_spike_comparison(
                first_cmp,
                out_dir / f"{FIGURE_NAMES['first_spike_steps']}.{fmt}",
                f"Figure 8: the model before (step {a}) and after (step {b}) the first spike "
                f"({tag})",
            )
        )
    if second_cmp is not None:
        a, b = second_cmp["steps"]
        made.append(
            plots.plot_second_spike_comparison(
                second_cmp,
                out_dir / f"{FIGURE_NAMES['second_spike_steps']}.{fmt}",
                f"Figures 9c / 9d: variables as the second operand before (step {a}) and "
                f"after (step {b}) the second spike ({tag})",
            )
        )
    return [saved_name(fig) for fig in made]


def _acc_intervals(acc: dict | None, sizes: dict[str, int]) -> dict | None:
    """Per evaluation set: accuracy, size, correct count and its 95% Wilson interval."""
    from empirical.stats import accuracy_intervals

    return accuracy_intervals(acc, sizes) if acc and sizes else None


def _acc_at(records: list[dict], step: int | None) -> dict | None:
    for r in records:
        if r["step"] == step:
            return r["acc"]
    return None


FIGURE_NAMES = {
    "attention": "attention_patterns",
    "ov_mlp_cosine": "ov_mlp_cosine",
    "probes": "probes",
    "fourier_neuron": "fourier_neuron",
    "fourier_spectrum": "fourier_spectrum",
    "qk1_embeddings": "qk1_embeddings",
    "qk1_positional": "qk1_positional",
    "qk2_ov1_identity": "qk2_ov1_identity",
    "progress_measures": "progress_measures",
    "second_spike": "second_spike",
    "first_spike_steps": "first_spike_steps",
    "second_spike_steps": "second_spike_steps",
}


def probes_title(accuracy: float, p: int, tag: str) -> str:
    """The probes figure's title: what is plotted, and a verdict on the sum computed from the
    isolated OV-MLP circuit's measured accuracy (never asserted where it is not reached)."""
    what = f"Linear probes and the isolated layer-2 OV-MLP circuit ({tag})"
    right = f"the circuit alone gets the sum right on {100 * accuracy:.1f}% of all {p}x{p} pairs"
    if accuracy >= 0.99:
        return f"{what}\n{right}"
    return f"{what}\n{right}: not the sum of every pair (>= 99% not reached)"


def _figures(
    out_dir: Path, cfg, step, raw, history, records, phases, fmt: str = "png", label=None
) -> list[str]:
    """Write every figure to out_dir as NAME.fmt (png, pdf or svg); returns the file names.
    `label` names the run in titles (default "NAME seed S")."""
    label = label or f"{cfg.name} seed {cfg.seed}"
    tag = f"{label}, step {step}"
    task = cfg.task

    def at(key: str) -> Path:
        return out_dir / f"{FIGURE_NAMES[key]}.{fmt}"

    made = [
        plots.plot_attention_examples(
            raw["examples"], at("attention"), f"Attention patterns ({tag})"
        ),
        plots.plot_ov_mlp_cosine(
            raw["cos"], raw["same"], at("ov_mlp_cosine"), f"OV-MLP circuit ({tag})"
        ),
        plots.plot_probes_and_circuit(
            raw["probes"],
            raw["isolated"],
            task.p,
            at("probes"),
            probes_title(raw["isolated"]["accuracy"], task.p, tag),
        ),
        plots.plot_fourier_neuron(
            raw["fourier"]["fit"],
            raw["fourier"]["model_pre"],
            at("fourier_neuron"),
            f"Fourier features ({tag})",
            r2_model=raw["fourier"]["summary"].get("best_neuron_r2_full_model"),
        ),
        plots.plot_fourier_spectrum(
            raw["fourier"]["fit"],
            at("fourier_spectrum"),
            f"Layer-2 MLP neurons vs Gromov's form ({tag})",
        ),
        plots.plot_qk1_embeddings(
            raw["qk1"], at("qk1_embeddings"), f"Layer-1 QK on embeddings ({tag})"
        ),
        plots.plot_qk1_positional(
            raw["pref"],
            at("qk1_positional"),
            f"Numbers' positional preference in layer 1 ({tag})",
        ),
        plots.plot_qk2_identity(raw["ident"], at("qk2_ov1_identity"), tag),
    ]
    if history is not None:
        made.append(
            plots.plot_progress(
                history,
                records,
                phases,
                at("progress_measures"),
                f"Progress measures over training ({label})",
            )
        )
        made.append(
            plots.plot_second_spike(
                history,
                records,
                phases,
                task.r2,
                at("second_spike"),
                f"Variables as second operand over training ({label}; "
                f"never second in training: {', '.join(task.r2) or 'none'})",
            )
        )
    return [saved_name(fig) for fig in made]


def _phase_of(step: int | None, phases: dict | None) -> str:
    if step is None or phases is None:
        return "-"
    first, second = phases.get("first_spike"), phases.get("second_spike")
    if first is None or step < first["start_step"]:
        return "1"
    if second is None or step < second["start_step"]:
        return "2"
    return "3"


def _fmt(x, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def _fmt_ci(acc, n: int | None) -> str:
    """'97.2% [95.3, 98.3]': an accuracy over n sequences with its 95% Wilson interval."""
    from empirical.stats import accuracy_interval, correct_count, format_accuracy

    if acc is None or not n:
        return _fmt(acc, True)
    return format_accuracy(acc, accuracy_interval(correct_count(acc, n), n))


def summary_markdown(result: dict) -> str:
    m = result["model"]
    lines = [
        f"# Analysis of {result['run_dir']} at step {result['step']}",
        "",
        f"Checkpoint `{result['checkpoint']}`; probe data: {result['probe_data']['n_test']} "
        f"sequences, {result['probe_data']['distribution']}. Definitions: docs/analysis.md.",
        "",
    ]
    acc = result.get("accuracy_at_step")
    if acc:
        ci = result.get("accuracy_at_step_ci95") or {}
        lines += [
            "## Accuracy at this step",
            "",
            "95% interval: Wilson score interval over the evaluation set's sequences "
            "(empirical.stats).",
            "",
            "| set | accuracy | 95% interval | sequences |",
            "| --- | --- | --- | --- |",
        ]
        for k, v in acc.items():
            c = ci.get(k)
            interval = f"{100 * c['ci95'][0]:.1f}-{100 * c['ci95'][1]:.1f}%" if c else "-"
            lines.append(f"| {k} | {_fmt(v, True)} | {interval} | {c['n'] if c else '-'} |")
        lines.append("")
    n_test = result["probe_data"]["n_test"]
    cos = m["ov_mlp_cosine"]["by_kind"]
    same = m["same_addition_cosine"]
    iso = m["isolated_ov_mlp"]
    pr = m["answer_probes"]
    four = m["fourier"]
    pref = m["qk1_positional_preference"]
    ident = m["qk2_ov1_identity"]
    qk1 = m["qk1_embeddings"]
    lines += [
        "## Section 5: the mechanism",
        "",
        "| quantity | value |",
        "| --- | --- |",
    ]
    att = m["attention"]["summary"]
    for k in ("0var", "1var", "2var"):
        if k in att:
            d = att[k]
            var = d.get("l1_eq_to_variable_operands")
            lines.append(
                f"| `=` attention, {k}: layer 1 on positions L-3, L-2 (on variable operands) / "
                f"layer 2 on the value positions | {_fmt(d['l1_eq_to_operand_positions'])}"
                + (f" ({_fmt(var)})" if var is not None else "")
                + f" / {_fmt(d['l2_eq_to_value_positions'])} |"
            )
    for k, d in cos.items():
        lines.append(
            f"| cos(MLP input, OV(W_E[x] + W_E[y])), {k}: matched / shuffled | "
            f"{_fmt(d['matched']['mean'])} / {_fmt(d['shuffled']['mean'])} |"
        )
    lines += [
        f"| same addition, variable vs direct form: matched / mismatched cosine | "
        f"{_fmt(same['matched']['mean'])} / {_fmt(same['mismatched']['mean'])} |",
        f"| answer probe before the MLP (resid_mid), held-out accuracy [95% interval] | "
        f"{_fmt_ci(pr['resid_mid']['test_acc'], n_test)} |",
        f"| answer probe after the MLP (resid_post), held-out accuracy (model itself) | "
        f"{_fmt_ci(pr['resid_post']['test_acc'], n_test)} "
        f"({_fmt_ci(pr['model_test_acc'], n_test)}) |",
        f"| isolated OV-MLP circuit, all p^2 pairs | {_fmt(iso['accuracy'], True)} "
        f"(MLP only: {_fmt(iso['accuracy_mlp_only'], True)}) |",
        f"| MLP neurons: mean R^2 of Gromov fit (active) / share R^2 >= 0.9 | "
        f"{_fmt(four['r2_mean_active'])} / {_fmt(four['frac_r2_above_0.9'], True)} |",
        f"| key frequencies (dominant for >= 5% of well-fitted neurons) | "
        f"{four['key_frequencies']} |",
        f"| best neuron (Figure 11): index, frequency, R^2 | {four['best_neuron']}, "
        f"{four['best_neuron_freq']}, {_fmt(four['best_neuron_r2'])} |",
        f"| layer 1: `=` prefers positions | {qk1['eq_top2_positions']} |",
        f"| layer 1 (Fig. 6): numbers -> variables, mean score gap over other tokens / share "
        f"of numbers whose top key token is a variable | {_fmt(qk1.get('num_to_var_gap'))} / "
        f"{_fmt(qk1.get('num_top_key_is_var'), True)} |",
        f"| layer 1 (Fig. 6): positions 0..L-5 -> variables, gap / share top key a variable | "
        f"{_fmt(qk1.get('pos_to_var_gap'))} / {_fmt(qk1.get('pos_top_key_is_var'), True)} |",
        f"| layer 1 (Fig. 6): position x position rises to the right, rank correlation with "
        f"the key position (queries 2..L-5 / all) | {_fmt(qk1.get('pos_pos_rank_corr_region'))} "
        f"/ {_fmt(qk1.get('pos_pos_rank_corr'))} |",
        f"| layer 1: numbers prefer the previous position (Fig. 7a) | "
        f"{_fmt(pref['fraction'], True)} |",
        f"| layer 2 QK on OV'd variables: identity score / mean margin (Fig. 7b) | "
        f"{_fmt(ident['identity_score'])} / {_fmt(ident['margin_mean'])} |",
        "",
        "## Progress measures (Appendix B)",
        "",
    ]
    dyn = result.get("training_dynamics")
    phases = result.get("phases")
    if phases:
        fs, ss = phases.get("first_spike"), phases.get("second_spike")
        lines.append(
            f"Detected phases (empirical.train.phases): 0-var >= 90% at step "
            f"{phases.get('zero_var_learned_step')}; first spike "
            + (f"{fs['start_step']}-{fs['end_step']}" if fs else "none")
            + "; second spike "
            + (f"{ss['start_step']}-{ss['end_step']}" if ss else "none")
            + ". Phase 1 ends where the first spike starts, phase 3 starts with the second."
        )
        lines.append("")
    lines += [
        "Each measure twice: ours (docs/analysis.md) and the authors' definition of it "
        "(`@authors`, their progress_measures.py; empirical.analysis.authors). first: the first "
        "snapshot at or above the threshold; stays: the first from which every later one is.",
        "",
        "| measure | threshold | ours at this step | authors' at this step | ours: first / "
        "stays >= from | authors': first / stays >= from | phase there (ours / authors') | "
        "paper's phase |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    values = m["progress_measures"]
    order = list(MEASURE_NAMES)
    crossings = dyn["crossings"] if dyn else {}
    if dyn:
        big = 10**12
        order.sort(
            key=lambda n: crossings[n]["stable"] if crossings[n]["stable"] is not None else big
        )

    def cross(name):
        c = crossings.get(name)
        if not c:
            return "-", None
        first, stable = c["first"], c["stable"]
        text = f"{first if first is not None else '-'} / {stable if stable is not None else '-'}"
        return text, stable

    for name in order:
        theirs = name + SUFFIX
        ours_text, ours_stable = cross(name)
        their_text, their_stable = cross(theirs)
        lines.append(
            f"| {name} | {MEASURES[name][0]:g} | {_fmt(values.get(name))} | "
            f"{_fmt(values.get(theirs))} | {ours_text} | {their_text} | "
            f"{_phase_of(ours_stable, phases)} / {_phase_of(their_stable, phases)} | "
            f"{PAPER_PHASE[name]} |"
        )
    lines.append("")
    if dyn:
        for label, names in (
            ("ours", order),
            ("authors'", [n + SUFFIX for n in MEASURE_NAMES if n + SUFFIX in crossings]),
        ):
            if not names:
                continue
            names = sorted(
                names,
                key=lambda n: (
                    crossings[n]["stable"] if crossings[n]["stable"] is not None else 1e12
                ),
            )
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
        lines += [f"{len(dyn['steps'])} snapshots analysed in {dyn['seconds']:.1f} s.", ""]
    agree = result.get("definition_agreement")
    if agree:
        lines += [
            "### Ours vs the authors' definitions over the snapshots",
            "",
            "| measure | mean abs difference | largest (step: ours / authors') | snapshots "
            "differing by > 0.05 |",
            "| --- | --- | --- | --- |",
        ]
        for name, a in agree.items():
            lines.append(
                f"| {name} | {_fmt(a['mean_abs_diff'])} | {_fmt(a['max_abs_diff'])} "
                f"({a['max_at_step']}: {_fmt(a['ours_there'])} / {_fmt(a['theirs_there'])}) | "
                f"{_fmt(a['share_diff_above_0.05'], True)} |"
            )
        lines.append("")
    plateau = result.get("phase2_plateau")
    if not plateau and dyn and phases:
        lines += [
            "## Phase 2 plateau of the routing measures (Appendix B)",
            "",
            "Not measurable on this run: it needs both spikes detected and a snapshot between "
            "the end of the first and the start of the second.",
            "",
        ]
    if plateau:
        lines += [
            "## Phase 2 plateau of the routing measures (Appendix B)",
            "",
            f"Over the {plateau['n_snapshots']} snapshots from step {plateau['start']} (end of the "
            f"first spike) to step {plateau['end']} (start of the second). The paper: these "
            "measures plateau between 80% and 99% in phase 2.",
            "",
            "| measure | mean | min | max | all within 80-99% | mean within 80-99% |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, d in plateau["routing"].items():
            lines.append(
                f"| {name} | {_fmt(d['mean'], True)} | {_fmt(d['min'], True)} | "
                f"{_fmt(d['max'], True)} | {'yes' if d['within_80_99'] else 'no'} | "
                f"{'yes' if d['mean_within_80_99'] else 'no'} |"
            )
        lines.append("")
    lines += _spike_summary(result)
    if dyn:
        spike = dyn["second_spike"]
        r2 = set(result["task"]["r2"])
        lines += [
            "## Second operand by variable (Figure 9), first / last snapshot",
            "",
            "| variable at L-2 | never 2nd in training | layer-1 `=`->L-2 | "
            "layer-2 `=`->its value | accuracy |",
            "| --- | --- | --- | --- | --- |",
        ]
        for letter, sp in spike.items():
            lines.append(
                f"| {letter} | {'yes' if letter in r2 else 'no'} | "
                f"{_fmt(sp['l1_eq_to_second'][0])} -> {_fmt(sp['l1_eq_to_second'][-1])} | "
                f"{_fmt(sp['l2_eq_to_second_value'][0])} -> "
                f"{_fmt(sp['l2_eq_to_second_value'][-1])} | "
                f"{_fmt(sp['accuracy'][0], True)} -> {_fmt(sp['accuracy'][-1], True)} |"
            )
        lines.append("")
    if result.get("figures"):
        lines += ["## Figures", ""] + [f"- [{f}]({f})" for f in result["figures"]] + [""]
    lines.append(f"Analysis took {result.get('seconds', 0):.1f} s.")
    return "\n".join(lines) + "\n"


def _spike_summary(result: dict) -> list[str]:
    cmp = result.get("spike_comparisons") or {}
    lines = []
    first = cmp.get("first_spike")
    if first:
        a, b = first["steps"]
        sa, sb = first["states"][str(a)], first["states"][str(b)]
        lines += [
            f"## First spike, step {a} vs {b} (Figure 8: first_spike_steps)",
            "",
            f"Example: `{first['example']['text']}` (answer {first['example']['answer']}); "
            f"means over {sa['n_1var']} 1-var probe sequences.",
            "",
            f"| quantity | step {a} | step {b} |",
            "| --- | --- | --- |",
        ]
        rows = (
            ("layer-1 `=` attention on the variable operand", "l1_eq_on_variable_operand", 0),
            ("layer-1 `=` attention on the number operand", "l1_eq_on_number_operand", 0),
            ("share of sequences with more on the variable", "l1_eq_variable_above_number", 1),
            ("variable matrix ebar W_QK^2 ebar^T: diagonal rows", "identity_authors", 1),
            ("variable matrix: mean diagonal margin", "diag_margin_authors", 0),
            ("our identity score (with `=` and numbers)", "identity_ours", 1),
            ("accuracy on the 1-var probe sequences", "accuracy_1var", 1),
            ("prediction on the example", "example_prediction", 2),
        )
        for label, key, kind in rows:
            if kind == 2:
                lines.append(f"| {label} | {sa[key]} | {sb[key]} |")
            else:
                lines.append(
                    f"| {label} | {_fmt(sa[key], bool(kind))} | {_fmt(sb[key], bool(kind))} |"
                )
        lines.append("")
    second = cmp.get("second_spike")
    if second:
        a, b = second["steps"]
        sa, sb = second["states"][str(a)], second["states"][str(b)]
        r2 = set(second["restricted"])
        lines += [
            f"## Second spike, step {a} vs {b} (Figures 9c / 9d: second_spike_steps)",
            "",
            "Per variable as the second operand (position L-2): layer-1 `=` attention on L-2 "
            "(9c), layer-2 `=` attention on its assigned number (9d), accuracy.",
            "",
            "| variable | never 2nd in training | layer-1 `=`->L-2 | layer-2 `=`->its number | "
            "accuracy |",
            "| --- | --- | --- | --- | --- |",
        ]
        for v, pa in sa["per_variable"].items():
            pb = sb["per_variable"].get(v)
            if pb is None:
                continue
            lines.append(
                f"| {v} | {'yes' if v in r2 else 'no'} | {_fmt(pa['l1_eq_to_second'])} -> "
                f"{_fmt(pb['l1_eq_to_second'])} | {_fmt(pa['l2_eq_to_second_value'])} -> "
                f"{_fmt(pb['l2_eq_to_second_value'])} | {_fmt(pa['accuracy'], True)} -> "
                f"{_fmt(pb['accuracy'], True)} |"
            )
        lines.append("")
        oa, ob = sa.get("operand_attention"), sb.get("operand_attention")
        if oa and ob:
            lines += [
                "`=` on a variable operand, by variable and operand position, over the probe "
                f"sequences, step {a} -> {b}: layer-1 attention on it / share of sequences "
                "where that is below 1/4 (what fails attn_l1_equal_to_operands) / layer-2 "
                "attention on its assigned number / accuracy:",
                "",
                "| variable | as first operand (L-3) | as second operand (L-2) |",
                "| --- | --- | --- |",
            ]
            letters = sorted(oa["first"].keys() | oa["second"].keys())
            for v in letters:
                cells = []
                for side in ("first", "second"):
                    x, y = oa[side].get(v), ob[side].get(v)
                    if x is None or y is None:
                        cells.append("-")
                        continue
                    cells.append(
                        f"{_fmt(x['l1_eq_attention'])} -> {_fmt(y['l1_eq_attention'])} / "
                        f"{_fmt(x['share_below_quarter'], True)} -> "
                        f"{_fmt(y['share_below_quarter'], True)} / "
                        f"{_fmt(x['l2_eq_on_value'])} -> {_fmt(y['l2_eq_on_value'])} / "
                        f"{_fmt(x['accuracy'], True)} -> {_fmt(y['accuracy'], True)} "
                        f"(n {x['n']})"
                    )
                lines.append(f"| {v} | {cells[0]} | {cells[1]} |")
            lines.append("")
    return lines


def history_from_json(d: dict) -> ProgressHistory:
    """A ProgressHistory from analysis.json's "training_dynamics"."""
    return ProgressHistory(
        d["steps"], d["measures"], d["second_spike"], d["crossings"], d.get("seconds", 0.0)
    )
