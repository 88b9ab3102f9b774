"""`python -m empirical attribute` (empirical/bridge/attribution): the replay reproduces the
run bit for bit, the groups add up to the total change, the straight path, the errors."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from disentangled.errors import UsageError
from empirical.bridge.attribution.options import STEP_RULES, AttributeOptions, AttributionOptions
from empirical.bridge.attribution.outputs import summary_markdown, window_report
from empirical.bridge.attribution.replay import check_replayed, replay
from empirical.bridge.attribution.run_attribution import AttributionError, attribute_window
from empirical.bridge.attribution.targets import float64_weights, labelled_scores
from empirical.bridge.compare_qk.coords import coordinates, theorem_w
from empirical.cli import attribute as attribute_cli
from empirical.model.checkpoint import load_checkpoint
from empirical.model.groups import GROUPS, group_of, groups_of_names
from empirical.report.writer import write_report
from empirical.runs.config import load_run_config
from empirical.runs.rundir import RunDir
from empirical.train.loop import train_run
from empirical.train.state import load_training_state


def write_window(result: dict, out, figures: bool = True) -> list:
    """The window's files written (the command's way), as the paths written."""
    return list(write_report(window_report(result), out, figures).values())


SMOKE = ["train.steps=40", "task.eval_size=200", "train.snapshot_every=10"]
DRAWS = 200  # sign patterns of the first-order nulls (the default 2000 takes a second a window)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A smoke run of 40 steps with snapshots every 10, and a copy of its training
    checkpoint at step 20 (the run went on to 40 after it: a stop and a resume)."""
    cfg = load_run_config("configs/smoke.toml", SMOKE)
    base = tmp_path_factory.mktemp("attr")
    run = base / "run"
    train_run(cfg, run, progress=False, stop_at=20)
    shutil.copy(run / "checkpoints" / "last.pt", base / "step20.pt")
    train_run(cfg, run, progress=False, resume=True)
    return run, base / "step20.pt"


def test_the_replay_reproduces_the_run_bit_for_bit(tiny_run):
    run_dir, ckpt20 = tiny_run
    run = RunDir(run_dir)
    cfg = run.read_config()
    checkpoint = load_training_state(ckpt20)
    states = dict(replay(cfg, checkpoint, 40))
    assert sorted(states) == list(range(20, 41))
    again = dict(replay(cfg, checkpoint, 40))  # the checkpoint is not changed by a replay
    assert all(torch.equal(again[40][k], states[40][k]) for k in states[40])
    final = load_checkpoint(run.last_checkpoint)["model_state"]
    assert all(torch.equal(final[k], states[40][k]) for k in final)
    for step in (20, 30, 40):
        assert check_replayed(run, step, states[step])["equal"] is True
    # the check can fail: a state one step off is not the run's
    assert check_replayed(run, 30, states[31])["equal"] is False


def test_the_scores_are_compare_qks():
    from empirical.model.config import ModelConfig
    from empirical.model.transformer import AssignAddTransformer

    model = AssignAddTransformer(ModelConfig.for_task(p=11, K=3, L=16).filled(), seed=3)
    w = float64_weights(model.state_dict())
    S = labelled_scores(w, 11, 3, 16, float(model.cfg.attn_scale)).numpy()
    expected = coordinates(model, 11, 3, 16).project(theorem_w(model))
    assert S.shape == expected.shape
    assert abs(S - expected).max() < 1e-12


def test_groups_name_every_parameter_once():
    from empirical.model.fast import param_names

    groups = groups_of_names(list(param_names(2)))
    assert list(groups) == list(GROUPS)
    assert sum(len(v) for v in groups.values()) == len(param_names(2))
    assert group_of("blocks.1.attn.W_K") == "layer2_qk"
    assert group_of("blocks.0.attn.W_O") == "layer1_ov"
    assert group_of("blocks.1.attn.W_Q", n_layers=3) == "middle_qk"


def test_the_groups_add_up_to_the_total_change_on_the_replayed_path(tiny_run, tmp_path):
    run_dir, ckpt20 = tiny_run
    opts = AttributionOptions(checkpoint=str(ckpt20), eval_size=40, progress=False,
                              null_draws=DRAWS)  # fmt: skip
    result = attribute_window(run_dir, 20, 40, opts)
    assert result["path"]["kind"] == "replay" and result["rule"] == "simpson"
    assert [c["equal"] for c in result["replay_checks"]] == [True, True, True]
    assert set(result["rules"]) == set(STEP_RULES) - {"simpson4", "simpson8"}  # when asked
    targets = result["targets"]
    for name, t in targets.items():
        assert abs(t["sum_of_groups"] + t["residual"] - t["total"]) < 1e-12
        assert t["residual_rel"] <= 0.01, (name, t)
    # the score depends on W_E, W_pos, layer-1 OV and layer-2 QK only: the others give 0
    for g in ("layer1_qk", "layer2_ov", "mlp", "unembed"):
        assert targets["score"]["groups"][g] == 0.0
    assert targets["score"]["total"] > 0  # the norm of the score change
    # the first-order (start) rule is worse than the headline: the check can fail
    worst = max(result["rules"]["start"].values())
    assert worst > max(result["rules"]["simpson"].values())
    out = tmp_path / "out"
    written = write_window(result, out / "20_40", figures=False)  # drawn: the tests below
    assert {p.name for p in written} == {"attribution.json", "attribution.npz"}
    saved = json.loads((out / "20_40" / "attribution.json").read_text())
    assert set(saved["targets"]["loss/1var/ind"]) >= {"total", "groups", "residual"}
    assert "| score |" in summary_markdown([result])


def test_simpson_on_quarters_is_finer(tiny_run):
    run_dir, ckpt20 = tiny_run
    opts = AttributionOptions(checkpoint=str(ckpt20), eval_size=50, progress=False,
                              rule="simpson4", null_draws=DRAWS)  # fmt: skip
    rules = attribute_window(run_dir, 20, 22, opts)["rules"]
    assert set(rules) == set(STEP_RULES) - {"simpson8"}
    losses = [t for t in rules["simpson"] if t.startswith("loss/")]
    assert sum(rules["simpson4"][t] for t in losses) < sum(rules["simpson"][t] for t in losses)
    opts.rule = "simpson8"
    eighths = attribute_window(run_dir, 20, 22, opts)["rules"]["simpson8"]
    assert sum(eighths[t] for t in losses) < sum(rules["simpson4"][t] for t in losses)


def test_the_straight_path_between_snapshots(tiny_run):
    run_dir, _ = tiny_run
    opts = AttributionOptions(path="straight", nodes=6, eval_size=100, progress=False,
                              null_draws=DRAWS)  # fmt: skip
    result = attribute_window(run_dir, 20, 40, opts)
    assert result["path"]["snapshots"] == [20, 30, 40]
    assert result["rule"] == "gauss-legendre-6"
    # the scores are polynomials of degree 8 along a line: 6 points integrate them exactly
    assert result["targets"]["score"]["residual_rel"] < 1e-9
    assert result["targets"]["score_barv"]["residual_rel"] < 1e-9


def test_refusals(tiny_run, tmp_path, capsys):
    run_dir, ckpt20 = tiny_run
    opts = AttributionOptions(checkpoint=str(ckpt20), eval_size=20, progress=False)
    with pytest.raises(AttributionError, match="after the window's start"):
        attribute_window(run_dir, 10, 30, opts)
    with pytest.raises(AttributionError, match="snapshots at both ends"):
        attribute_window(run_dir, 15, 30, AttributionOptions(path="straight", progress=False))
    # a stored snapshot that is not what the training gives: the replay is refused
    bad = tmp_path / "run"
    shutil.copytree(run_dir, bad)
    snap = load_checkpoint(bad / "snapshots" / "step_000030.pt")
    snap["model_state"]["unembed.W_U"] += 1e-3
    torch.save(snap, bad / "snapshots" / "step_000030.pt")
    with pytest.raises(AttributionError, match="does not reproduce the run"):
        attribute_window(bad, 20, 40, opts)
    assert attribute_cli.main([str(run_dir), "--window", "40:20"]) == 2
    assert "needs 0 <= A < B" in capsys.readouterr().err
    code = attribute_cli.main([str(run_dir), "--window", "20:40", "--sets", "nope", "--quiet",
                               "--checkpoint", str(ckpt20), "--out", str(tmp_path / "o")])
    assert code == 2
    assert "not an evaluation set" in capsys.readouterr().err


def test_step_rules_and_null_draws_are_the_clis():
    from empirical.bridge.attribution import against_theory, paths

    assert paths.STEP_RULES is STEP_RULES  # one list: the paths' and --rule's choices
    opts = AttributeOptions(run_dir="run", windows=["1:2", (3, 5)])
    assert opts.windows == ((1, 2), (3, 5))
    assert opts.null_draws == against_theory.NULL_DRAWS == AttributionOptions().null_draws
    with pytest.raises(UsageError, match="--rule nope: must be one of 'start'"):
        AttributionOptions(rule="nope")
    with pytest.raises(UsageError, match=r"--window 1:2,4:3: 4:3: needs 0 <= A < B"):
        AttributeOptions(run_dir="run", windows=["1:2", "4:3"])


def test_each_piece_against_its_prediction_with_g1(tiny_run):
    """Item 5's machinery, fed W_QK's G1: the dual-frame cosine is compare-qk's own, a
    prediction equal to the change beats the sign null, the parameter-space readers work."""
    import numpy as np

    from empirical.bridge.attribution.against_theory import compare_piece, compare_pieces
    from empirical.bridge.compare_qk.observe import one_var_batch
    from empirical.bridge.compare_qk.options import Options
    from empirical.bridge.compare_qk.prediction import make_predictor
    from empirical.bridge.compare_qk.snapshot import analyse_snapshot
    from empirical.model.checkpoint import load_model

    run_dir, _ = tiny_run
    run = RunDir(run_dir)
    cfg = run.read_config()
    model_a, model_b = load_model(run.snapshot(20)), load_model(run.snapshot(30))
    opts = Options(batch_size=256, prediction_size=2048, distribution="unrestricted")
    batch = one_var_batch(cfg.task, opts.batch_size, opts.seed, opts.order, opts.distribution)
    scalars, blocks = analyse_snapshot(model_a, cfg.task, batch, opts, model_b,
                                       make_predictor(cfg.task, opts))  # fmt: skip
    w_a = float64_weights(model_a.state_dict())
    w_b = float64_weights(model_b.state_dict())
    G1 = blocks["pred_dual"]
    out = compare_pieces(cfg, w_a, w_b, {"layer2_qk": G1}, draws=DRAWS)["layer2_qk"]
    assert out["frame"] == "dual"
    assert abs(out["cos"] - scalars["comparison"]["dual"]["diff"]["cos"]["all"]) < 1e-9
    assert np.isfinite(out["null95"]) and 0 < out["p_sign"] <= 1
    observed = blocks["dual/diff"]
    same = compare_piece(observed, observed)
    assert same["cos"] > 1 - 1e-12 and same["beats_null"] and same["p_sign"] < 0.01
    flipped = compare_piece(observed, -observed)
    assert flipped["cos"] < -1 + 1e-12 and flipped["beats_null"]
    # a parameter-space prediction for another group: its own change is read back exactly
    names = groups_of_names(list(w_a))
    delta = torch.cat([(w_b[n] - w_a[n]).reshape(-1) for n in names["W_E"]]).numpy()
    ones = np.ones(sum(w_a[n].numel() for n in names["layer1_ov"]))
    res = compare_pieces(cfg, w_a, w_b, {"W_E": delta, "layer1_ov": ones}, draws=DRAWS)
    assert res["W_E"]["frame"] == "param" and res["W_E"]["cos"] > 1 - 1e-12
    assert abs(res["layer1_ov"]["cos"]) < 1
    with pytest.raises(ValueError, match="entries"):
        compare_piece(observed, G1[:, :3])
    # attribute's own G1 row carries compare-qk's null for the same window: one number
    from empirical.bridge.attribution.first_order import _g1
    from empirical.bridge.compare_qk.metrics import sign_null95
    from empirical.bridge.compare_qk.snapshot import g1_direction

    row = _g1(cfg, w_a, w_b, DRAWS)["layer2_qk"]
    G = g1_direction(cfg, model_a)[0]
    assert row["null"] == "compare-qk's" and np.isfinite(row["null95_draws"])
    from empirical.bridge.attribution.against_theory import read_layer2_qk_dual

    assert row["null95"] == sign_null95(G, read_layer2_qk_dual(cfg, w_a, w_b))


def test_a_window_reads_back(tiny_run, tmp_path):
    from empirical.bridge.attribution.outputs import plot_shares, read_window

    run_dir, _ = tiny_run
    opts = AttributionOptions(path="straight", nodes=2, eval_size=20, progress=False,
                              null_draws=DRAWS)  # fmt: skip
    result = attribute_window(run_dir, 20, 40, opts)
    write_window(result, tmp_path / "w", figures=False)
    back = read_window(tmp_path / "w")
    assert back["targets"] == json.loads(json.dumps(result["targets"]))
    assert back["_path"].pieces == result["_path"].pieces
    assert (back["_path"].table() == result["_path"].table()).all()
    # the figure from the files is the figure from the result (built, not drawn: the slow test
    # below draws it)
    import matplotlib.pyplot as plt

    figs = [plot_shares(back), plot_shares(result)]
    curves = [[line.get_xydata().tolist() for ax in f.axes for line in ax.get_lines()]
              for f in figs]  # fmt: skip
    n_groups = len(result["_path"].groups)
    assert len(curves[0]) == len(result["_path"].targets) * (n_groups + 1)  # + the zero line
    assert curves[0] == curves[1]
    for f in figs:
        plt.close(f)


@pytest.mark.slow
def test_a_windows_figures_are_drawn(tiny_run, tmp_path):
    run_dir, ckpt20 = tiny_run
    opts = AttributionOptions(checkpoint=str(ckpt20), eval_size=20, progress=False,
                              null_draws=DRAWS)  # fmt: skip
    written = write_window(attribute_window(run_dir, 20, 30, opts), tmp_path / "w")
    assert {p.name for p in written} >= {"shares.png", "first_order.png"}
    for name in ("shares.png", "first_order.png"):
        assert (tmp_path / "w" / name).stat().st_size > 10_000, name


def test_adam_denominators_are_the_optimisers(tiny_run):
    """The denominators after a replayed step give that step back: w' = w (1 - lr wd) -
    lr m_hat / denominator (torch's AdamW), to float32 rounding."""
    from empirical.bridge.attribution.replay import adam_denominators, replay_learner

    run_dir, ckpt20 = tiny_run
    cfg = RunDir(run_dir).read_config()
    before = None
    for step, learner in replay_learner(cfg, load_training_state(ckpt20), 21):
        if step == 20:
            before = {n: p.detach().double().clone() for n, p in learner.model.named_parameters()}
            continue
        denom = adam_denominators(learner)
        group = learner.optimizer.param_groups[0]
        lr, wd, beta1 = group["lr"], group["weight_decay"], group["betas"][0]
        for name, p in learner.model.named_parameters():
            state = learner.optimizer.state[p]
            m_hat = state["exp_avg"].double() / (1 - beta1 ** float(state["step"]))
            want = before[name] * (1 - lr * wd) - lr * m_hat / denom[name]
            assert torch.allclose(p.detach().double(), want, rtol=1e-5, atol=1e-7), name


def test_first_order_reads_the_training_loss_gradient(tiny_run, tmp_path):
    """Item 5: a window whose change is exactly minus the training loss's gradient at A is
    predicted with cosine 1 in every group (and its reverse with -1); the sign prediction is
    another direction; --first-order-only writes the table and figure, no path."""
    from empirical.bridge.attribution.first_order import first_order, first_order_rows
    from empirical.bridge.attribution.targets import Targets

    run_dir, ckpt20 = tiny_run
    run = RunDir(run_dir)
    cfg = run.read_config()
    sets = run.read_eval_sets(cfg)
    w_a = float64_weights(load_checkpoint(run.snapshot(20))["model_state"])
    targets = Targets.of(cfg, sets, 50, w_a, w_a)
    mix = {"loss/0var/ind": cfg.task.frac_0var, "loss/1var/ind": cfg.task.frac_1var,
           "loss/2var/ind": cfg.task.frac_2var}  # fmt: skip
    grads = targets.gradients(w_a, list(mix))
    for sign in (1, -1):
        w_b = {n: w_a[n] - sign * 1e-3 * sum(f * grads[t][n] for t, f in mix.items()) for n in w_a}
        out = first_order(cfg, targets, w_a, w_b, g1=False)
        for group, c in out["train"]["gradient"].items():
            assert c["cos"] == pytest.approx(sign, abs=1e-9), group
        assert all(abs(c["cos"]) < 0.999 for c in out["train"]["sign"].values())
        assert any(abs(c["cos"]) < 0.999 for c in out["loss/1var/ind"]["gradient"].values())
    opts = AttributionOptions(checkpoint=str(ckpt20), eval_size=50, progress=False,
                              first_order_only=True, null_draws=DRAWS)  # fmt: skip
    result = attribute_window(run_dir, 20, 30, opts)
    assert "_path" not in result and "targets" not in result
    assert result["null_draws"] == DRAWS  # each p-value is k / (DRAWS + 1)
    ps = [c["p_sign"] * (DRAWS + 1) for _, _, _, c in first_order_rows(result["first_order"])]
    assert ps and all(abs(p - round(p)) < 1e-6 and 1 <= round(p) <= DRAWS + 1 for p in ps)
    assert {r[1] for r in first_order_rows(result["first_order"])} >= {"gradient", "sign", "adam"}
    written = write_window(result, tmp_path / "fo")
    assert {p.name for p in written} == {"attribution.json", "first_order.png"}
    assert "| -grad train |" in summary_markdown([result])


def test_both_paths_of_one_window_share_the_total_not_the_split(tiny_run, tmp_path):
    """`--path both`: the straight lines between the snapshots and the replayed steps of one
    window; the totals are one number (the same end points), the shares per group differ by
    what paths.md reports, and sum |share| measures the parts' cancellation."""
    from empirical.bridge.attribution.path_comparison import cancellation, compare_paths

    run_dir, ckpt20 = tiny_run
    out = tmp_path / "both"
    assert attribute_cli.main([str(run_dir), "--window", "20:40", "--path", "both",
                               "--checkpoint", str(ckpt20), "--eval-size", "40", "--nodes", "6",
                               "--null-draws", "50", "--no-figures", "--quiet",
                               "--out", str(out)]) == 0  # fmt: skip
    straight = json.loads((out / "20_40" / "straight" / "attribution.json").read_text())
    replayed = json.loads((out / "20_40" / "replay" / "attribution.json").read_text())
    assert straight["path"]["kind"] == "straight" and replayed["path"]["kind"] == "replay"
    cmp = json.loads((out / "20_40" / "paths.json").read_text())
    assert cmp["paths"] == ["straight", "replay"]
    t = cmp["targets"]["loss/1var/ind"]
    assert t["totals_rel_diff"] < 1e-9
    for g, (a, b, d) in t["shares"].items():
        assert a == pytest.approx(straight["targets"]["loss/1var/ind"]["groups"][g] / t["total"])
        assert d == pytest.approx(b - a)
    assert compare_paths(straight, replayed)["targets"]["score"]["sum_abs_share"][0] >= 1.0
    assert cancellation({"total": 1.0, "groups": {"a": 2.0, "b": -1.0}}) == 3.0
    assert "| loss/1var/ind |" in (out / "20_40" / "paths.md").read_text()
    assert "sum abs share" in (out / "summary.md").read_text()
