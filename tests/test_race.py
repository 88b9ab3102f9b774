"""The race (empirical.bridge.race, `python -m empirical race`; docs/race.md): the criterion's
step-0 quantities against direct computations, the configuration whose answer is known by
construction (only W_QK trains: the memory must win, and the prediction is the memory's own
budget), the fit of tau on the fit half only, the fixed split, and a tiny run of the command
that resumes. Small cases use p = 3, K = 2."""

from __future__ import annotations

import json
import math

import pytest
import torch

from empirical.__main__ import main as empirical_main
from empirical.bridge.ladder_dynamics.config import DynamicsConfig, TheoremSection
from empirical.bridge.ladder_dynamics.trainer import Context, make_optimizer, train_run
from empirical.bridge.race.configs import race_configs, split_of
from empirical.bridge.race.criterion import (
    StepZero,
    first_update,
    population_gradient,
    predict,
    score_update,
    step_zero,
)
from empirical.bridge.race.fit import fit_tau
from empirical.bridge.theorem_model.construct import (
    build_theorem_model,
    score_matrix,
    set_score_matrix,
)
from empirical.bridge.theorem_model.gradient import population_accuracy

SMALL = TheoremSection(p=3, K=2, beta=2.0, xi=3.0)


def _cfg(**kw) -> DynamicsConfig:
    return DynamicsConfig(**{"theorem": SMALL, "steps": 60, "eval_every": 5, **kw})


def _composes(ctx: Context, dW: torch.Tensor, s: float) -> bool:
    model = build_theorem_model(ctx.cfg.theorem.model_config())
    W0 = score_matrix(model)[: ctx.dim, : ctx.dim].clone()
    set_score_matrix(model, W0 + s * dW)
    return population_accuracy(model, ctx.eval_2var)["2var"] >= ctx.cfg.threshold


def _dW(ctx: Context, releases=()) -> torch.Tensor:
    model = build_theorem_model(ctx.cfg.theorem.model_config())
    opt = make_optimizer(model, ctx.cfg, releases)
    population_gradient(model, ctx.training_population(releases))
    attn = model.blocks[1].attn
    return score_update(model, {"blocks.1.attn.W_Q": -opt.param_groups[0]["lr"] * attn.W_Q.grad},
                        ctx.dim)  # fmt: skip


def test_only_w_qk_trained_the_memory_must_win_and_the_run_agrees():
    """Everything frozen but W_QK: no input route (D_in = 0, T_in infinite), so the memory
    wins at every tau and the prediction is T_mem <= S; T_mem is where W^0 + s dW starts to
    compose (bisected to 1%), and the ladder's own run composes."""
    ctx = Context.build(_cfg())
    sz = step_zero(ctx, ())
    assert sz.D_in == 0 and math.isinf(sz.T_in) and sz.per_group.keys() == {"qk"}
    assert 0 < sz.T_mem < math.inf
    dW = _dW(ctx)
    assert _composes(ctx, dW, sz.T_mem * 1.001) and not _composes(ctx, dW, sz.T_mem / 1.02)
    assert sz.memory["contrast_min"] > 0  # the memory block's diagonal leads every row
    for tau in (1e-6, 1.0, 1e6, math.inf):
        got = predict(sz, tau, ctx.cfg.steps)
        assert got["winner"] == "memory"
        assert got["predicted"] == (sz.T_mem <= ctx.cfg.steps)
    # the ladder's run, given the memory's budget twice over, composes (T_mem is a first-order
    # time: the gradient grows along the path, and the run composes earlier, here at ~T_mem / 2)
    run = train_run(Context.build(_cfg(steps=math.ceil(2 * sz.T_mem), seeds=[0])), (), 0)
    assert run.emergence_step is not None and run.emergence_step <= 2 * sz.T_mem


def test_inputs_rate_is_the_first_order_decrease_through_layer1_and_embeddings():
    """D_in = sum over layer 1's and the embeddings' tensors of lr ||g||^2 (SGD), with g the
    exact population gradient by autograd; T_in = loss / D_in; the memory's dW is the same
    as with W_QK alone (the released pieces do not move W_QK's first step)."""
    releases = ("layer1", "embeddings")
    ctx = Context.build(_cfg(releases=list(releases)))
    sz = step_zero(ctx, releases)
    model = build_theorem_model(ctx.cfg.theorem.model_config())
    opt = make_optimizer(model, ctx.cfg, releases)
    loss = population_gradient(model, ctx.training_population(releases))
    expected = sum(g["lr"] * float(p.grad.pow(2).sum()) for g in opt.param_groups
                   if g["name"] in releases for p in g["params"])  # fmt: skip
    assert sz.D_in == pytest.approx(expected, rel=1e-12) and sz.D_in > 0
    assert sz.T_in == pytest.approx(loss / expected, rel=1e-12)
    assert sz.T_mem == pytest.approx(step_zero(Context.build(_cfg()), ()).T_mem, rel=0.02)


def test_adam_first_update_is_the_gradient_over_its_rms():
    g = torch.tensor([[3.0, -4.0], [0.0, 0.0]])
    d = first_update(g, 0.1, adam=True)
    assert torch.allclose(d, -0.1 * g / g.pow(2).mean().sqrt())
    assert float(d.pow(2).mean().sqrt()) == pytest.approx(0.1)
    assert torch.equal(first_update(torch.zeros(3), 0.1, adam=True), torch.zeros(3))
    assert torch.equal(first_update(g, 0.1, adam=False), -0.1 * g)


def test_score_update_of_two_factors_is_the_product_of_the_stepped_factors():
    ctx = Context.build(_cfg(qk_factors=True))
    model = build_theorem_model(ctx.cfg.theorem.model_config())
    attn = model.blocks[1].attn
    gen = torch.Generator().manual_seed(0)
    dQ = 1e-2 * torch.randn(attn.W_Q.shape, generator=gen, dtype=attn.W_Q.dtype)
    dK = 1e-2 * torch.randn(attn.W_K.shape, generator=gen, dtype=attn.W_K.dtype)
    got = score_update(model, {"blocks.1.attn.W_Q": dQ, "blocks.1.attn.W_K": dK}, ctx.dim)
    Q, K = attn.W_Q.detach()[0], attn.W_K.detach()[0]
    want = ((Q + dQ[0]) @ (K + dK[0]).T - Q @ K.T)[: ctx.dim, : ctx.dim]
    assert torch.allclose(got, want / model.cfg.attn_scale, atol=1e-14)


def _row(name, T_mem, T_in, composed, split, two_var=False):
    sz = StepZero(loss=1.0, D_in=0.0 if math.isinf(T_in) else 1 / T_in, T_in=T_in,
                  T_mem=T_mem, two_var_trained=two_var, adam=False, per_group={}, memory={},
                  seconds=0.0)  # fmt: skip
    return {"name": name, "step_zero": sz, "composed": composed, "split": split, "steps": 300}


def test_tau_is_fitted_on_the_fit_half_only():
    """Fit rows separable at T_mem / T_in between 2 and 8: tau lands there with fit accuracy
    1; the test half's outcomes, whatever they are, do not move tau."""
    fit = [_row("a", 10, 100, True, "fit"), _row("b", 20, 10, True, "fit"),
           _row("c", 80, 10, False, "fit"), _row("d", 100, 1, False, "fit")]  # fmt: skip
    test = [_row("e", 10, 1, True, "test"), _row("f", 10, 1000, False, "test")]
    got = fit_tau(fit + test, 300)
    assert got["fit_accuracy"] == 1 and 2 < got["tau"] < 8 and got["interval"] == [2, 8]
    flipped = [dict(r, composed=not r["composed"]) for r in test]
    assert fit_tau(fit + flipped, 300) == got


def test_split_is_fixed_by_the_name_and_the_configurations_are_enough():
    configs = race_configs()
    names = [c.name for c in configs]
    assert len(names) == len(set(names)) >= 30
    assert split_of("baseline") == "fit" and split_of("ov") == "test"
    halves = {s: sum(c.split == s for c in configs) for s in ("fit", "test")}
    assert min(halves.values()) >= 15, halves


def test_command_writes_the_table_and_resumes(tmp_path, capsys):
    out = tmp_path / "race"
    argv = ["race", "--only", "baseline", "layer1", "--seeds", "0", "steps=20",
            "theorem.p=3", "theorem.K=2", "theorem.xi=3", "--out", str(out), "--quiet"]  # fmt: skip
    assert empirical_main(argv) == 0
    result = json.loads((out / "race.json").read_text())
    assert {"criterion", "tau", "configs"} <= result.keys()
    rows = {c["name"]: c for c in result["configs"]}
    assert rows.keys() == {"baseline", "layer1"}
    for c in rows.values():
        assert {"name", "split", "predicted", "composed"} <= c.keys()
        assert isinstance(c["predicted"], bool) and isinstance(c["composed"], bool)
    assert rows["baseline"]["winner"] == "memory" and rows["baseline"]["step_zero"]["T_in"] is None
    state = (out / "race_state.json").read_text()
    assert empirical_main([a for a in argv if a not in ("--seeds", "0")]) == 0  # resumes with
    # the seeds it was started with (seed 0): nothing run again
    assert (out / "race_state.json").read_text() == state
    assert (out / "race.png").is_file() and "T_mem" in (out / "summary.md").read_text()
    assert empirical_main([*argv[:-3], "steps=30", "--out", str(out), "--quiet"]) == 2
    assert "other settings" in capsys.readouterr().err
    # more seeds add runs beside the recorded ones (seed 0's run is kept as it was)
    before = json.loads(state)["configs"]["baseline"]["runs"]["0"]
    more = ["race", "--only", "baseline", "--seeds", "0", "1", *argv[6:]]
    assert empirical_main(more) == 0
    runs = json.loads((out / "race_state.json").read_text())["configs"]["baseline"]["runs"]
    assert set(runs) == {"0", "1"} and runs["0"] == before
    # --rescore: a race.json scored again, nothing trained
    again = tmp_path / "rescored"
    assert empirical_main(["race", "--rescore", str(out / "race.json"), "--out", str(again),
                           "--quiet"]) == 0  # fmt: skip
    scored = json.loads((again / "race.json").read_text())
    assert scored["scores"]["fit"]["tau_free"]["of"] == 1 and "--rescore" in scored[
        "provenance"]["command"]  # fmt: skip
    assert not (again / "race_state.json").exists()


def test_configuration_names_with_an_equals_sign_stay_names(tmp_path):
    from empirical.bridge.race.options import RaceOptions
    from empirical.config.options import parse_options

    out = ["--out", str(tmp_path / "race")]
    opts = parse_options(RaceOptions, [*out, "--only", "baseline", "embeddings@lr=1e-4",
                                       "steps=20"])  # fmt: skip
    assert opts.only == ("baseline", "embeddings@lr=1e-4") and opts.overrides == ("steps=20",)
    opts = parse_options(RaceOptions, [*out, "theorem.p=3", "--seeds", "1", "0", "steps=20"])
    assert opts.seeds == (1, 0) and opts.overrides == ("theorem.p=3", "steps=20")
    assert [c.name for c in opts.configurations()][:2] == ["baseline", "ov"]


# -- issue #45: outcomes that are sustained, seeds that differ in W^0, the rules to beat ----------


def test_composed_means_sustained_over_the_last_fifth():
    from empirical.bridge.ladder_dynamics.trainer import sustained

    steps = list(range(0, 301, 5))
    touched = [0.5] * len(steps)
    touched[58] = 0.995  # step 290 only: touches the threshold, then falls back
    assert not sustained(steps, touched, 300, 0.99)
    held = [0.5 if s <= 240 else 0.999 for s in steps]  # every evaluation after step 240
    assert sustained(steps, held, 300, 0.99)
    assert not sustained(steps[:-1], held[:-1], 300, 0.99)  # stopped early: not sustained
    held[-3] = 0.98
    assert not sustained(steps, held, 300, 0.99)


def test_each_seed_perturbs_every_trained_tensor_and_only_those():
    from empirical.bridge.ladder_dynamics.trainer import perturb_start

    def start(seed, scale):
        model = build_theorem_model(SMALL.model_config())
        opt = make_optimizer(model, _cfg(), ("ov",))
        perturb_start(opt, scale, seed)
        return dict(model.named_parameters())

    base, a, a2, b = start(0, 0.0), start(0, 0.01), start(0, 0.01), start(1, 0.01)
    for name in ("blocks.1.attn.W_Q", "blocks.1.attn.W_V", "blocks.1.attn.W_O"):
        d = (a[name] - base[name]).detach()
        rms = float(base[name].detach().pow(2).mean().sqrt())
        assert 0.005 < float(d.pow(2).mean().sqrt()) / rms < 0.02  # about 1% of its RMS
        assert torch.equal(a[name], a2[name]) and not torch.equal(a[name], b[name])
    assert torch.equal(a["embed.W_E"], base["embed.W_E"])  # frozen here: untouched


def test_the_tau_free_rule_and_the_majority_class_are_scored_beside_the_criterion():
    from empirical.bridge.race.fit import tau_free, tau_scan
    from empirical.bridge.race.scores import scores

    rows = [_row("a", 10, 100, True, "fit"), _row("b", 20, 10, True, "fit"),
            _row("c", 80, 10, False, "fit"), _row("d", 100, 1, False, "fit"),
            _row("e", 10, 1000, True, "test"), _row("f", 10, 1, False, "test"),
            _row("g", 10, math.inf, True, "test")]  # fmt: skip
    for r in rows:
        r["known_when_written"] = r["name"] == "g"
    got = scores(rows, fit_tau(rows, 300), 300)["scores"]
    # the tau-free rule says "not composed" wherever the inputs train without 2-var
    assert not tau_free(rows[0]["step_zero"], 300) and tau_free(rows[-1]["step_zero"], 300)
    assert got["test"]["criterion"]["right"] == 3 and got["test"]["tau_free"]["right"] == 2
    assert got["test"]["majority"]["right"] == 2 and got["test"]["majority_class"] is True
    assert got["test_unseen"]["criterion"]["of"] == 2 and got["test_known"]["criterion"]["of"] == 1
    assert got["test_decides"]["criterion"]["of"] == 2  # e and f: inputs train, no 2-var
    # the accuracy over every tau the fit half cannot tell apart: e's ratio 0.01 lies outside
    # (2, 8), f's 10 too: one piece, the same score throughout
    scan = tau_scan([r for r in rows if r["split"] == "test"], [2, 8], 300)
    assert [(p["from"], p["to"], p["right"]) for p in scan] == [(2, 8, 3)]


def test_the_observed_critical_rate_is_where_composition_stops():
    from empirical.bridge.race.scores import observed_critical

    got = observed_critical([(1e-5, True), (1e-4, True), (1e-3, False), (1e-2, False)])
    assert got["below"] == 1e-4 and got["above"] == 1e-3 and got["monotone"]
    assert got["critical"] == pytest.approx(math.sqrt(1e-7))
    odd = observed_critical([(1e-5, False), (1e-4, True), (1e-3, False)])
    assert odd["below"] == 1e-4 and not odd["monotone"]
    assert observed_critical([(1e-5, False), (1e-4, False)])["critical"] is None
