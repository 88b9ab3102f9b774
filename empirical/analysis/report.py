"""All analyses of one run: numbers in analysis.json, figures, and a markdown summary.

    result = analyze_run("runs/paper/seed0")            # final checkpoint + every snapshot
    result = analyze_run(run_dir, step=5000)            # another snapshot
    numbers, raw = analyze_model(model, task, data)     # the Section-5 analyses of one model

Output directory (default RUN_DIR/analysis, or RUN_DIR/analysis/step_XXXXXX with `step`):
    analysis.json            every number (see docs/analysis.md)
    summary.md               the headline numbers, the progress-measure crossings and phases
    attention_patterns.png   Figure 4      ov_mlp_cosine.png        Figures 5, 5a
    probes.png               probes, isolated OV-MLP circuit
    fourier_neuron.png       Figure 11     fourier_spectrum.png     R^2, key frequencies
    qk1_embeddings.png       Figure 6      qk1_positional.png       Figure 7a
    qk2_ov1_identity.png     Figure 7b
    progress_measures.png    Figure 12     second_spike.png         Figure 9
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
from empirical.analysis.common import ProbeData, make_probe_data, torch_threads
from empirical.analysis.fourier import fourier_analysis
from empirical.analysis.ov_mlp import isolated_ov_mlp, ov_mlp_cosine, same_addition_cosine
from empirical.analysis.probes import answer_probes
from empirical.analysis.progress import (
    MEASURE_NAMES,
    MEASURES,
    ProgressHistory,
    list_snapshots,
    progress_measures,
    progress_over_training,
)
from empirical.analysis.qk import qk1_embedding_scores, qk1_positional_preference, qk2_ov1_identity
from empirical.config_io import atomic_write_bytes
from empirical.task import TaskConfig

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


def _load_target(run_dir: Path, step: int | None):
    from empirical.model import load_checkpoint, model_from_checkpoint

    if step is None:
        path = run_dir / "checkpoints" / "last.pt"
        if not path.exists():
            snaps = list_snapshots(run_dir)
            if not snaps:
                raise FileNotFoundError(f"{run_dir}: no checkpoints/last.pt and no snapshots")
            step, path = snaps[-1]
    else:
        path = run_dir / "snapshots" / f"step_{step:06d}.pt"
        if not path.exists():
            avail = [s for s, _ in list_snapshots(run_dir)]
            shown = ", ".join(map(str, avail[:8])) + (", ..." if len(avail) > 8 else "")
            raise FileNotFoundError(
                f"{run_dir}: no snapshot for step {step} (snapshots at: {shown or 'none'})"
            )
    ckpt = load_checkpoint(path)
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
) -> dict:
    """Analyse the run in `run_dir` (final checkpoint, or the snapshot at `step`) and, with
    `dynamics`, every `every`-th snapshot; write analysis.json, summary.md and the figures to
    `out_dir`. Returns the analysis.json content."""
    from empirical.run_config import load_run_config
    from empirical.task import load_eval_sets
    from empirical.train.metrics import read_metrics
    from empirical.train.phases import detect_phases

    run_dir = Path(run_dir)
    if not (run_dir / "config.toml").exists():
        raise FileNotFoundError(f"{run_dir}: no config.toml (not a run directory)")
    cfg = load_run_config(run_dir / "config.toml")
    task = cfg.task
    seed = cfg.seed if seed is None else seed
    if out_dir is None:
        out_dir = (
            run_dir / "analysis" if step is None else run_dir / "analysis" / f"step_{step:06d}"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with torch_threads(threads):
        model, model_step, model_path = _load_target(run_dir, step)
        held = None
        if (run_dir / "eval_sets.pt").exists():
            held = load_eval_sets(run_dir / "eval_sets.pt").held_out
        data = make_probe_data(task, seed, n=n_probe)
        numbers, raw = analyze_model(model, task, data, held, seed)
        records = read_metrics(run_dir / "metrics.jsonl")
        phases = detect_phases(records) if records else None
        history = None
        if dynamics and list_snapshots(run_dir):
            history = progress_over_training(run_dir, data, every=every, progress=progress)
        result = {
            "run_dir": str(run_dir),
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
            },
            "model": numbers,
            "accuracy_at_step": _acc_at(records, model_step),
            "phases": phases.to_dict() if phases is not None else None,
            "measures": {
                name: {"threshold": t, "definition": d} for name, (t, d) in MEASURES.items()
            },
            "training_dynamics": to_jsonable(history.to_dict()) if history else None,
        }
        if figures:
            result["figures"] = _figures(out_dir, cfg, model_step, raw, history, records, phases)
    result["seconds"] = round(time.perf_counter() - t_start, 2)
    atomic_write_bytes(out_dir / "analysis.json", json.dumps(result, indent=1).encode())
    (out_dir / "summary.md").write_text(summary_markdown(result))
    return result


def _acc_at(records: list[dict], step: int | None) -> dict | None:
    for r in records:
        if r["step"] == step:
            return r["acc"]
    return None


def _figures(out_dir: Path, cfg, step, raw, history, records, phases) -> list[str]:
    tag = f"{cfg.name} seed {cfg.seed}, step {step}"
    task = cfg.task
    made = [
        plots.plot_attention_examples(
            raw["examples"], out_dir / "attention_patterns.png", f"Attention patterns ({tag})"
        ),
        plots.plot_ov_mlp_cosine(
            raw["cos"], raw["same"], out_dir / "ov_mlp_cosine.png", f"OV-MLP circuit ({tag})"
        ),
        plots.plot_probes_and_circuit(
            raw["probes"],
            raw["isolated"],
            task.p,
            out_dir / "probes.png",
            f"The layer-2 MLP computes the sum ({tag})",
        ),
        plots.plot_fourier_neuron(
            raw["fourier"]["fit"],
            raw["fourier"]["model_pre"],
            out_dir / "fourier_neuron.png",
            f"Fourier features ({tag})",
            r2_model=raw["fourier"]["summary"].get("best_neuron_r2_full_model"),
        ),
        plots.plot_fourier_spectrum(
            raw["fourier"]["fit"],
            out_dir / "fourier_spectrum.png",
            f"Layer-2 MLP neurons vs Gromov's form ({tag})",
        ),
        plots.plot_qk1_embeddings(
            raw["qk1"], out_dir / "qk1_embeddings.png", f"Layer-1 QK on embeddings ({tag})"
        ),
        plots.plot_qk1_positional(
            raw["pref"],
            out_dir / "qk1_positional.png",
            f"Numbers' positional preference in layer 1 ({tag})",
        ),
        plots.plot_qk2_identity(raw["ident"], out_dir / "qk2_ov1_identity.png", tag),
    ]
    if history is not None:
        made.append(
            plots.plot_progress(
                history,
                records,
                phases,
                out_dir / "progress_measures.png",
                f"Progress measures over training ({cfg.name} seed {cfg.seed})",
            )
        )
        made.append(
            plots.plot_second_spike(
                history,
                records,
                phases,
                task.r2,
                out_dir / "second_spike.png",
                f"Variables as second operand over training ({cfg.name} seed {cfg.seed}; "
                f"never second in training: {', '.join(task.r2) or 'none'})",
            )
        )
    return [p.name for p in made]


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
        lines += ["## Accuracy at this step", "", "| set | accuracy |", "| --- | --- |"]
        lines += [f"| {k} | {_fmt(v, True)} |" for k, v in acc.items()]
        lines.append("")
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
        f"| answer probe before the MLP (resid_mid), held-out accuracy | "
        f"{_fmt(pr['resid_mid']['test_acc'], True)} |",
        f"| answer probe after the MLP (resid_post), held-out accuracy (model itself) | "
        f"{_fmt(pr['resid_post']['test_acc'], True)} ({_fmt(pr['model_test_acc'], True)}) |",
        f"| isolated OV-MLP circuit, all p^2 pairs | {_fmt(iso['accuracy'], True)} "
        f"(MLP only: {_fmt(iso['accuracy_mlp_only'], True)}) |",
        f"| MLP neurons: mean R^2 of Gromov fit (active) / share R^2 >= 0.9 | "
        f"{_fmt(four['r2_mean_active'])} / {_fmt(four['frac_r2_above_0.9'], True)} |",
        f"| key frequencies (dominant for >= 5% of well-fitted neurons) | "
        f"{four['key_frequencies']} |",
        f"| best neuron (Figure 11): index, frequency, R^2 | {four['best_neuron']}, "
        f"{four['best_neuron_freq']}, {_fmt(four['best_neuron_r2'])} |",
        f"| layer 1: `=` prefers positions | {qk1['eq_top2_positions']} |",
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
        "| measure | threshold | at this step | first >= threshold | stays >= from | "
        "phase there | paper's phase |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = list(MEASURE_NAMES)
    if dyn:
        crossings = dyn["crossings"]
        big = 10**12
        order.sort(
            key=lambda n: crossings[n]["stable"] if crossings[n]["stable"] is not None else big
        )
    for name in order:
        value = m["progress_measures"][name]
        threshold = MEASURES[name][0]
        if dyn:
            c = dyn["crossings"][name]
            first, stable = c["first"], c["stable"]
        else:
            first = stable = None
        lines.append(
            f"| {name} | {threshold:g} | {_fmt(value)} | {first if first is not None else '-'} | "
            f"{stable if stable is not None else '-'} | {_phase_of(stable, phases)} | "
            f"{PAPER_PHASE[name]} |"
        )
    lines.append("")
    if dyn:
        crossed = [n for n in order if dyn["crossings"][n]["stable"] is not None]
        never = [n for n in order if dyn["crossings"][n]["stable"] is None]
        text = "Order of events (by the step from which each measure stays >= its threshold): "
        text += " < ".join(crossed) if crossed else "no measure crossed its threshold"
        if crossed and never:
            text += "; never: " + ", ".join(never)
        text += f". {len(dyn['steps'])} snapshots analysed in {dyn['seconds']:.1f} s."
        lines += [text, ""]
        spike = dyn["second_spike"]
        r2 = set(result["task"]["r2"])
        lines += [
            "## Second operand by variable (Figure 9), first / last snapshot",
            "",
            "| variable at L-2 | never 2nd in training | layer-1 `=`->L-2 | "
            "layer-2 `=`->its value | accuracy |",
            "| --- | --- | --- | --- | --- |",
        ]
        for letter, s in spike.items():
            lines.append(
                f"| {letter} | {'yes' if letter in r2 else 'no'} | "
                f"{_fmt(s['l1_eq_to_second'][0])} -> {_fmt(s['l1_eq_to_second'][-1])} | "
                f"{_fmt(s['l2_eq_to_second_value'][0])} -> "
                f"{_fmt(s['l2_eq_to_second_value'][-1])} | "
                f"{_fmt(s['accuracy'][0], True)} -> {_fmt(s['accuracy'][-1], True)} |"
            )
        lines.append("")
    if result.get("figures"):
        lines += ["## Figures", ""] + [f"- [{f}]({f})" for f in result["figures"]] + [""]
    lines.append(f"Analysis took {result.get('seconds', 0):.1f} s.")
    return "\n".join(lines) + "\n"


def history_from_json(d: dict) -> ProgressHistory:
    """A ProgressHistory from analysis.json's "training_dynamics"."""
    return ProgressHistory(
        d["steps"], d["measures"], d["second_spike"], d["crossings"], d.get("seconds", 0.0)
    )
