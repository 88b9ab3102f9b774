"""The figures one run's analysis writes (file names in FIGURE_NAMES, docs/analysis.md):
the model's (Figures 4-7, 11), over training (Figures 9, 12) and the step comparisons
(Figures 8, 9c / 9d), each drawn by empirical.analysis.plots and titled with the run.
"""

from __future__ import annotations

from pathlib import Path

from empirical.analysis import plots
from empirical.report.figures import saved_name

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


def write_figures(
    out_dir: Path, cfg, step, raw, history, records, phases, fmt: str = "png", label=None
) -> list[str]:
    """Write every figure to out_dir as NAME.fmt (png, pdf or svg); returns the file names.
    `label` names the run in titles (default "NAME seed S")."""
    label = label or f"{cfg.name} seed {cfg.seed}"
    tag = f"{label}, step {step}"
    task = cfg.task

    def at(key: str) -> Path:
        return out_dir / f"{FIGURE_NAMES[key]}.{fmt}"

    four = raw["fourier"]
    made = [
        plots.plot_attention_examples(raw["examples"], at("attention"),
                                      f"Attention patterns ({tag})"),
        plots.plot_ov_mlp_cosine(raw["cos"], raw["same"], at("ov_mlp_cosine"),
                                 f"OV-MLP circuit ({tag})"),
        plots.plot_probes_and_circuit(raw["probes"], raw["isolated"], task.p, at("probes"),
                                      probes_title(raw["isolated"]["accuracy"], task.p, tag)),
        plots.plot_fourier_neuron(four["fit"], four["model_pre"], at("fourier_neuron"),
                                  f"Fourier features ({tag})",
                                  r2_model=four["summary"].get("best_neuron_r2_full_model")),
        plots.plot_fourier_spectrum(four["fit"], at("fourier_spectrum"),
                                    f"Layer-2 MLP neurons vs Gromov's form ({tag})"),
        plots.plot_qk1_embeddings(raw["qk1"], at("qk1_embeddings"),
                                  f"Layer-1 QK on embeddings ({tag})"),
        plots.plot_qk1_positional(raw["pref"], at("qk1_positional"),
                                  f"Numbers' positional preference in layer 1 ({tag})"),
        plots.plot_qk2_identity(raw["ident"], at("qk2_ov1_identity"), tag),
    ]  # fmt: skip
    if history is not None:
        made.append(plots.plot_progress(history, records, phases, at("progress_measures"),
                                        f"Progress measures over training ({label})"))
        made.append(plots.plot_second_spike(
            history, records, phases, task.r2, at("second_spike"),
            f"Variables as second operand over training ({label}; "
            f"never second in training: {', '.join(task.r2) or 'none'})",
        ))  # fmt: skip
    return [saved_name(fig) for fig in made]


def write_spike_figures(
    out_dir: Path, first_cmp: dict | None, second_cmp: dict | None, fmt: str, label: str
) -> list[str]:
    """Write the two step-comparison figures (Figure 8; Figures 9c / 9d) where compared;
    returns the file names."""
    made = []
    if first_cmp is not None:
        a, b = first_cmp["steps"]
        made.append(plots.plot_first_spike_comparison(
            first_cmp, out_dir / f"{FIGURE_NAMES['first_spike_steps']}.{fmt}",
            f"Figure 8: the model before (step {a}) and after (step {b}) the first spike "
            f"({label})",
        ))  # fmt: skip
    if second_cmp is not None:
        a, b = second_cmp["steps"]
        made.append(plots.plot_second_spike_comparison(
            second_cmp, out_dir / f"{FIGURE_NAMES['second_spike_steps']}.{fmt}",
            f"Figures 9c / 9d: variables as the second operand before (step {a}) and "
            f"after (step {b}) the second spike ({label})",
        ))  # fmt: skip
    return [saved_name(fig) for fig in made]
