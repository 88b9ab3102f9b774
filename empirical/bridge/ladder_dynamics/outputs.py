"""The dynamics ladder's files, declared once (`report`): ladder_dynamics.json (every number),
summary.md (the one table, the one-step checks), ladder_dynamics.png (the one figure),
config.toml (the config that made them); written by empirical.report.writer."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from empirical.bridge.ladder_dynamics.config import DynamicsConfig
from empirical.config.io import config_to_toml
from empirical.report.figures import OKABE_ITO
from empirical.report.writer import Figure, Json, Report


def _f(x, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def steps_text(values: list[int | None]) -> str:
    """The steps joined by commas, 'never' for None."""
    return ", ".join("never" if v is None else str(v) for v in values)


def summary_markdown(result: dict) -> str:
    cfg, one = result["config"], result["one_step"]
    th, fu, cs = cfg["theorem"], one["first_update"], one["composing_step"]
    lines = [
        "# The dynamics ladder: training from Theorem C.1's model",
        "",
        f"p = {th['p']}, K = {th['K']}, beta = {th['beta']}, xi = {th['xi']}; "
        f"{cfg['steps']} steps, batch {cfg['batch_size']} (0: whole population), "
        f"2-var evaluated on its whole population every {cfg['eval_every']} steps; "
        f"composed = 2-var accuracy >= {cfg['threshold']:.0%}; seeds {cfg['seeds']} "
        "(the minibatch stream). SGD rates: W (theorem units) "
        f"{cfg['sgd']['lr_qk']}, released pieces {cfg['sgd']['lr']}; AdamW: W_Q "
        f"{cfg['adamw']['lr_qk']}, released pieces {cfg['adamw']['lr']}, weight decay "
        f"{cfg['adamw']['weight_decay']}.",
        "",
        "## The baseline's one step",
        "",
        f"- First SGD update on the whole 1-var population vs lr x the simulator's exact "
        f"-dL/dW: max abs error {fu['max_abs_error_vs_exact_gradient']:.1e} (largest entry "
        f"{fu['max_abs_update']:.3g}); vs lr (xi G1 + R(xi)): "
        f"{fu['max_abs_error_vs_xi_G1_plus_R']:.1e}. |xi G1| = {fu['norm_xi_G1']:.3g}, "
        f"|R(xi)| = {fu['norm_R']:.3g}: the first update's cosine with G1 is "
        f"{_f(fu['cos_update_G1'], '.3f')}.",
        f"- Smallest one-step size composing 2-var (>= {cs['threshold']:.0%}): simulator "
        f"{_f(cs['lr_simulator'], '.4g')}, transformer {_f(cs['lr_transformer'], '.4g')} "
        f"(relative gap {_f(cs['relative_gap'], '.1e')}); the transformer's 2-var accuracy at "
        + ", ".join(f"{k} x: {v:.4f}" for k, v in cs["accuracy_at"].items())
        + f". The theorem's own step (along G1) composes from eta* = "
        f"{_f(cs['eta_star_g1'], '.4g')}, i.e. lr = eta*/xi = "
        f"{_f(cs['eta_star_g1_over_xi'], '.4g')} (transformer's 2-var accuracy there: "
        f"{_f(cs.get('accuracy_at_g1_prediction'), '.4f')}).",
    ]
    small = one.get("composing_step_xi1")
    if small:
        lines.append(
            f"- At xi = 1 (R(xi) small): simulator {_f(small['lr_simulator'], '.4g')}, "
            f"transformer {_f(small['lr_transformer'], '.4g')}, G1's eta*/xi = "
            f"{_f(small['eta_star_g1_over_xi'], '.4g')} (gap to the transformer's "
            f"{_f(small.get('g1_prediction_gap'), '.1%')}; at xi = {cs['xi']:g}: "
            f"{_f(cs.get('g1_prediction_gap'), '.1%')})."
        )
    lines += [
        "",
        f"## Variants ({len(cfg['seeds'])} seeds each)",
        "",
        "| variant | releases | composed (seeds) | 2-var >= threshold at step | spike step "
        "| cos(first update, G1) | cos(first 10, G1) | cos(spike update, G1) "
        "| final 2-var (min) | final 2-var, rule-allowed | final 1-var | final 0-var "
        "| memory diag / off |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in result["variants"]:
        rel = " + ".join(v["releases"]) or "none"
        div = f" ({v['diverged']} diverged)" if v["diverged"] else ""
        lines.append(
            f"| {v['variant']} | {rel} | {v['composed']}/{len(v['seeds'])}{div} | "
            f"{steps_text(v['emergence_steps'])} | {steps_text(v['spike_steps'])} | "
            f"{_f(v['cos_first'])} | {_f(v['cos_first10'])} | {_f(v['cos_spike'])} | "
            f"{_f(v['final_2var'], '.3f')} ({_f(v['final_2var_min'], '.3f')}) | "
            f"{_f(v.get('final_2var_allowed'), '.3f')} | "
            f"{_f(v['final_1var'], '.3f')} | {_f(v['final_0var'], '.3f')} | "
            f"{_f(v.get('memory_diag'))} / {_f(v.get('memory_offdiag'))} |"
        )
    lines += [
        "",
        "Cosines: mean over seeds, of the change of layer 2's score matrix (theorem basis "
        "block) with G1 of the theorem's model at W^0 (1-var). Spike: the evaluation window "
        "(after the first) with the largest rise of the 2-var accuracy; its update is W's "
        "change across that window. Memory: the mean diagonal / off-diagonal entry of the "
        "final W's bar_v x bar_v block (query ebar_u, key ebar_u'), the theorem's associative "
        "memory (0 at W^0).",
        "",
        f"Wall time: {result['seconds']:.0f} s ({result['seconds'] / 60:.1f} min) for the "
        f"one-step checks and {len(result['runs'])} runs.",
    ]
    return "\n".join(lines) + "\n"


def plot_ladder_dynamics(result: dict):
    """Left: mean 2-var accuracy over steps per variant. Right: per variant, the step at
    which 2-var composes (per seed; 'never' at the right edge) and the cosines with G1."""
    rows, runs = result["variants"], result["runs"]
    steps_total, thr = result["config"]["steps"], result["config"]["threshold"]
    fig, (ax1, ax2, ax3) = plt.subplots(
        1, 3, figsize=(17, 7.5), layout="constrained",
        gridspec_kw={"width_ratios": [1.5, 1, 0.8]},
    )  # fmt: skip
    ax3.sharey(ax2)
    # colour = the last release a variant adds; solid: that release alone, dashed: the
    # cumulative ladder up to it; black: the baseline
    palette = [c for k, c in OKABE_ITO.items() if k not in ("yellow", "black")]
    order = result["config"]["releases"]
    for v in rows:
        last = v["releases"][-1] if v["releases"] else None
        colour = "#000000" if last is None else palette[order.index(last) % len(palette)]
        style = "--" if len(v["releases"]) > 1 else "-"
        mine = [r for r in runs if r["variant"] == v["variant"]]
        n = min(len(r["acc_2var"]) for r in mine)
        x = mine[0]["eval_steps"][:n]
        y = np.mean([r["acc_2var"][:n] for r in mine], axis=0)
        ax1.plot(x, y, style, color=colour, label=v["variant"], lw=1.8)
    ax1.axhline(thr, color="grey", lw=0.8, ls=":")
    ax1.set(xlabel="training step", ylabel="2-var accuracy (whole population, mean of seeds)",
            title="2-var composition over training", ylim=(0, 1.02))  # fmt: skip
    ax1.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2,
               title="variant: solid = one release alone, dashed = cumulative")  # fmt: skip

    names = [v["variant"] for v in rows]
    ypos = np.arange(len(rows))[::-1]
    never = steps_total * 1.18
    for y, v in zip(ypos, rows, strict=True):
        xs = [never if s is None else s for s in v["emergence_steps"]]
        ax2.scatter(xs, [y] * len(xs), color=OKABE_ITO["blue"], zorder=3, s=28)
    ax2.axvline(never, color="grey", lw=0.8, ls="--")
    ticks = list(np.linspace(0, steps_total, 4))
    ax2.set_xticks([*ticks, never], [f"{t:.0f}" for t in ticks] + ["never"])
    ax2.set_yticks(ypos, names, fontsize=9)
    ax2.set_xlim(0, steps_total * 1.28)
    ax2.set(xlabel=f"first step with 2-var >= {thr:.0%}",
            title="when 2-var composes (a dot per seed)")  # fmt: skip

    keys = [("cos_first", "first update", OKABE_ITO["vermillion"]),
            ("cos_first10", "first 10 updates", OKABE_ITO["orange"]),
            ("cos_spike", "update across the spike", OKABE_ITO["green"])]  # fmt: skip
    h = 0.27
    for j, (key, label, colour) in enumerate(keys):
        vals = [np.nan if v[key] is None else v[key] for v in rows]
        ax3.barh(ypos + (1 - j) * h, vals, height=h, color=colour, label=label)
    ax3.axvline(0, color="black", lw=0.8)
    ax3.tick_params(labelleft=False)
    ax3.set_xlim(-1, 1)
    ax3.set(xlabel="cosine with G1 (mean of seeds)",
            title="updates of layer-2 W vs G1")  # fmt: skip
    ax3.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1)
    fig.suptitle("Training Theorem C.1's model with one constraint released at a time "
                 "(baseline: layer-2 W_QK only, plain SGD, 1-var data)")  # fmt: skip
    return fig


def report(result: dict, cfg: DynamicsConfig | None = None) -> Report:
    """ladder_dynamics.json, summary.md, the figure `ladder_dynamics` (write_report's format)
    and, given the config that made them, config.toml."""
    files = {
        "ladder_dynamics.json": Json(result, indent=1, plain=True),
        "summary.md": summary_markdown(result),
        "ladder_dynamics": Figure(lambda: plot_ladder_dynamics(result)),
    }
    if cfg is not None:
        files["config.toml"] = config_to_toml(cfg)
    return Report(files)
