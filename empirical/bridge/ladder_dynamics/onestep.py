"""The baseline's one-step checks (docs/ladder.md, "The dynamics ladder"):
`first_update_check`, the first plain-SGD update (dW = -lr_qk dL/dW) against the simulator's
exact population gradient and its split xi G1 + R(xi); `composing_step`, the smallest step
size lr whose single step W^0 - lr dL/dW(W^0) brings the 2-var accuracy to the threshold,
simulator against transformer (geometric grid, then bisection in log lr to a relative 1e-3),
beside the simulator's eta* of a step along G1 (`disentangled.one_step`) as eta* / xi.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from disentangled.experiments import log_bisect, one_step
from disentangled.gradient import g1, population_gradient, remainder
from disentangled.metrics import population_stats
from disentangled.model import initial_W
from empirical.bridge.ladder_dynamics.config import DynamicsConfig
from empirical.bridge.ladder_dynamics.trainer import Context, train_run
from empirical.bridge.theorem_model.construct import build_theorem_model, set_score_matrix
from empirical.bridge.theorem_model.gradient import population_accuracy, theorem_gradient
from empirical.bridge.theorem_model.layout import Layout
from empirical.bridge.theorem_model.token_population import theorem_population

GRID = tuple(float(x) for x in np.geomspace(1e-2, 1e4, 61))
REL_TOL = 1e-3


def first_update_check(cfg: DynamicsConfig) -> dict:
    """One full-population SGD step of the baseline (the real trainer and optimiser) against
    lr_qk x the simulator's exact -dL/dW; max abs errors and the update's split."""
    one = replace(cfg, steps=1, batch_size=0, releases=[])
    ctx = Context.build(one)
    run = train_run(ctx, (), seed=0)
    sim = cfg.theorem.model_config().sim_config()
    W0, xi, lr = initial_W(sim), cfg.theorem.xi, cfg.sgd.lr_qk
    exact = -population_gradient(W0, sim, xi, "1var")
    G1, R = g1(sim, "1var"), remainder(sim, xi, "1var")
    dW = run.first_update
    return {
        "lr_qk": lr, "max_abs_update": float(dW.abs().max()),
        "max_abs_error_vs_exact_gradient": float((dW - lr * exact).abs().max()),
        "max_abs_error_vs_xi_G1_plus_R": float((dW - lr * (xi * G1 + R)).abs().max()),
        "norm_xi_G1": float((xi * G1).norm()), "norm_R": float(R.norm()),
        "cos_update_G1": run.cos_first,
    }  # fmt: skip


def smallest_composing(
    composes: Callable[[float], bool], grid: tuple[float, ...] = GRID, rel_tol: float = REL_TOL
) -> float | None:
    """The smallest grid lr that composes, its lower edge bisected in log lr (to `rel_tol`)
    against the grid point below it; None when nothing on the grid composes."""
    prev = None
    for lr in grid:
        if composes(lr):
            return lr if prev is None else log_bisect(composes, prev, lr, rel_tol)
        prev = lr
    return None


def composing_step(cfg: DynamicsConfig, xi: float | None = None) -> dict:
    """The smallest composing one-step size, simulator vs transformer (module docstring),
    with the transformer's 2-var accuracy 5% below, at and 5% above the simulator's; at
    logit scale `xi` (default the config's)."""
    if xi is not None:
        cfg = replace(cfg, theorem=replace(cfg.theorem, xi=float(xi)))
    tcfg = cfg.theorem.model_config()
    sim, xi, thr = tcfg.sim_config(), cfg.theorem.xi, cfg.threshold
    W0 = initial_W(sim)
    g_sim = population_gradient(W0, sim, xi, "1var")

    def sim_composes(lr: float) -> bool:
        return population_stats(W0 - lr * g_sim, sim, "2var").accuracy >= thr

    model = build_theorem_model(tcfg)
    dim = Layout(tcfg).dim
    _, g_model = theorem_gradient(model, theorem_population(tcfg, "1var"), dim)
    pop2 = theorem_population(tcfg, "2var")

    def model_acc(lr: float) -> float:
        set_score_matrix(model, W0 - lr * g_model)
        return population_accuracy(model, pop2)["2var"]

    lr_sim = smallest_composing(sim_composes)
    lr_model = smallest_composing(lambda lr: model_acc(lr) >= thr)
    eta_g1 = one_step(sim).solving_intervals  # its default grid, edges bisected
    eta_star = eta_g1[0][0] if eta_g1 else None
    out = {
        "threshold": thr, "xi": xi, "lr_simulator": lr_sim, "lr_transformer": lr_model,
        "relative_gap": None, "eta_star_g1": eta_star,
        "eta_star_g1_over_xi": eta_star / xi if eta_star else None, "accuracy_at": {},
        "max_abs_gradient_gap": float((g_model - g_sim).abs().max()),
    }  # fmt: skip
    if lr_sim is not None:
        if lr_model is not None:
            out["relative_gap"] = abs(lr_model - lr_sim) / lr_sim
        for f in (0.95, 1.0, 1.05):
            out["accuracy_at"][f"{f:g}"] = model_acc(f * lr_sim)
    if out["eta_star_g1_over_xi"]:
        lr_g1 = out["eta_star_g1_over_xi"]
        out["accuracy_at_g1_prediction"] = model_acc(lr_g1)
        if lr_model is not None:
            out["g1_prediction_gap"] = abs(lr_model - lr_g1) / lr_g1
    return out


def one_step_report(cfg: DynamicsConfig) -> dict:
    """The first-update check, and the composing step at the config's xi and at xi = 1 (where
    the remainder R(xi) is small and G1's eta*/xi is the prediction)."""
    return {"first_update": first_update_check(cfg), "composing_step": composing_step(cfg),
            "composing_step_xi1": composing_step(cfg, xi=1.0)}  # fmt: skip
