"""Figure-3 sweeps: batched members equal single runs, own data per member, member-by-member
resume, clear errors, threshold detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.cli.sweep import main as sweep_main
from empirical.config.io import ConfigError
from empirical.experiments.sweep.metrics import MetricWeights, metric_value
from empirical.experiments.sweep.param_sweep import run_sweep
from empirical.experiments.sweep.results import results_report, summarize
from empirical.experiments.sweep.runner import plan_batches
from empirical.experiments.sweep.spec import SweepSpec, expand_members, parse_param
from empirical.experiments.sweep.thresholds import find_threshold
from empirical.experiments.sweep.trainer import train_batch
from empirical.model.batched import BatchedModel
from empirical.report.writer import write_report
from empirical.runs.config import load_run_config
from empirical.runs.metrics_log import read_metrics
from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.eval_sets import load_eval_sets
from empirical.task.pairs import held_out_pairs, is_held, training_generator
from empirical.train.batches import BatchStream
from empirical.train.loop import train_run
from empirical.train.optim import MemberAdamW
from empirical.train.state import load_training_state

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.toml"
TINY = ["task.eval_size=200", "train.steps=40", "train.snapshot_every=0"]


def tiny(*overrides: str):
    return load_run_config(SMOKE, [*TINY, *overrides])


def strip_time(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def assert_records_close(a, b, rel=1e-5):
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for key in ("acc", "loss"):
            assert ra[key].keys() == rb[key].keys()
            for name in ra[key]:
                assert ra[key][name] == pytest.approx(rb[key][name], rel=rel, abs=1e-6)
        if rb["train_loss"] is None:
            assert ra["train_loss"] is None
        else:
            assert ra["train_loss"] == pytest.approx(rb["train_loss"], rel=rel)


def final_weights(run_dir: Path) -> dict:
    return load_training_state(run_dir / "checkpoints" / "last.pt")["model_state"]


def test_batched_members_match_single_runs(tmp_path):
    cfgs = [tiny(), tiny("seed=1", "task.held_out_fraction=0.4", "task.ratio_2var_to_0var=0.5")]
    train_batch(
        [(c, tmp_path / f"batch{i}") for i, c in enumerate(cfgs)], progress=False, figures=False,
    )
    for i, cfg in enumerate(cfgs):
        train_run(cfg, tmp_path / f"single{i}", progress=False, figures=False)
        batched = read_metrics(tmp_path / f"batch{i}" / "metrics.jsonl")
        single = read_metrics(tmp_path / f"single{i}" / "metrics.jsonl")
        assert [r["step"] for r in batched] == [0, 20, 40]
        assert_records_close(batched, single)
        wb, ws = final_weights(tmp_path / f"batch{i}"), final_weights(tmp_path / f"single{i}")
        assert wb.keys() == ws.keys()
        for k in ws:
            torch.testing.assert_close(wb[k], ws[k], rtol=1e-5, atol=1e-7)
        # the member directory is a standard run directory, optimiser state included
        ob = load_training_state(tmp_path / f"batch{i}" / "checkpoints" / "last.pt")
        os_ = load_training_state(tmp_path / f"single{i}" / "checkpoints" / "last.pt")
        for j, entry in os_["optimizer_state"]["state"].items():
            for k, v in entry.items():
                torch.testing.assert_close(ob["optimizer_state"]["state"][j][k], v)
        assert (tmp_path / f"batch{i}" / "summary.json").is_file()


def test_batched_forward_and_grads_match_float64():
    cfg = tiny("model.dtype=float64")
    mc = cfg.built_model_config()
    from empirical.model.transformer import AssignAddTransformer

    seeds = [0, 3, 5]
    model = BatchedModel(mc, seeds)
    singles = [AssignAddTransformer(mc, seed=s) for s in seeds]
    gen = torch.Generator().manual_seed(0)
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, 0))
    batches = [sampler.sample(32, gen) for _ in seeds]
    tokens = torch.stack([b.tokens for b in batches])
    logits = model.forward_fast(tokens)
    loss = sum(torch.nn.functional.cross_entropy(logits[m], batches[m].labels) for m in range(3))
    loss.backward()
    for m, single in enumerate(singles):
        out = single.forward_fast(batches[m].tokens)
        torch.testing.assert_close(logits[m], out, rtol=1e-12, atol=1e-12)
        torch.nn.functional.cross_entropy(out, batches[m].labels).backward()
        for name, p in single.named_parameters():
            torch.testing.assert_close(
                model.w(name).grad[m], p.grad, rtol=1e-10, atol=1e-12, msg=name
            )


def test_members_get_their_own_held_out_pairs_and_data(tmp_path):
    base = tiny()
    spec = SweepSpec(param="task.held_out_fraction", values=[0.1, 0.5], seeds=[0])
    members = expand_members(base, spec)
    assert [m.cfg.task.held_out_fraction for m in members] == [0.1, 0.5]
    held = [held_out_pairs(m.cfg.task, m.cfg.seed) for m in members]
    assert held[0].shape[0] == members[0].cfg.task.n_held_out < held[1].shape[0]
    firsts = []
    for m, h in zip(members, held, strict=True):
        sampler = TrainingSampler(m.cfg.task, h)
        batch = sampler.sample(512, training_generator(m.cfg.seed))
        pairs = batch.operand_values
        assert not bool(is_held(pairs, h, m.cfg.task.p).any())  # never a held-out pair
        firsts.append(batch.tokens)
    assert not torch.equal(firsts[0], firsts[1])
    # the eval sets saved with each member hold that member's held-out pairs
    train_batch([(m.cfg, tmp_path / m.dirname) for m in members], progress=False, stop_at=20)
    for m, h in zip(members, held, strict=True):
        saved = load_eval_sets(tmp_path / m.dirname / "eval_sets.pt")
        assert torch.equal(saved.held_out, h)


def test_resume_skips_finished_and_continues_unfinished(tmp_path, capsys):
    args = ["--config", str(SMOKE), "--param", "pair_fraction=1.0,0.5", "--seeds", "0", *TINY]
    # uninterrupted, through the command line
    assert sweep_main([*args, "--out", str(tmp_path / "whole"), "--no-progress",
                       "--no-member-figures"]) == 0  # fmt: skip
    whole = tmp_path / "whole"
    for name in ("results.json", "summary.md", "smoke.png", "sweep.toml"):
        assert (whole / name).is_file(), name
    results = json.loads((whole / "results.json").read_text())
    assert [p["x"] for p in results["points"]] == [0.5, 1.0]
    err = capsys.readouterr().err
    assert "pair_fraction=0.5_seed0" in err and "step 40" in err

    base = tiny()
    split = tmp_path / "split"
    first = run_sweep(
        base,
        SweepSpec(param="pair_fraction", values=[1.0], seeds=[0]),
        split,
        progress=False,
        log=None,
        member_figures=False,
    )
    assert first.fresh == ["pair_fraction=1.0_seed0"]
    done = split / "members" / "pair_fraction=1.0_seed0" / "metrics.jsonl"
    # member_figures=False (--no-member-figures): the members' training curves are not drawn
    assert not list(done.parent.glob("training_curves.*"))
    assert not list((whole / "members").glob("*/training_curves.*"))
    mtime = done.stat().st_mtime_ns
    spec = SweepSpec(param="pair_fraction", values=[1.0, 0.5], seeds=[0])
    stopped = run_sweep(base, spec, split, progress=False, log=None, stop_at=20)
    assert stopped.skipped == ["pair_fraction=1.0_seed0"] and stopped.stopped_early
    assert stopped.results["missing_members"] == ["pair_fraction=0.5_seed0"]
    resumed = run_sweep(base, spec, split, progress=False, log=None)
    # by default a member that finishes here draws its curves
    assert (split / "members" / "pair_fraction=0.5_seed0" / "training_curves.png").is_file()
    assert resumed.skipped == ["pair_fraction=1.0_seed0"]
    assert resumed.resumed == ["pair_fraction=0.5_seed0"] and not resumed.fresh
    assert done.stat().st_mtime_ns == mtime  # the finished member was not touched
    for name in ("pair_fraction=1.0_seed0", "pair_fraction=0.5_seed0"):
        a = strip_time(read_metrics(whole / "members" / name / "metrics.jsonl"))
        b = strip_time(read_metrics(split / "members" / name / "metrics.jsonl"))
        assert_records_close(a, b)
        wa, wb = final_weights(whole / "members" / name), final_weights(split / "members" / name)
        for k in wa:
            torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-7)
    again = run_sweep(base, spec, split, progress=False, log=None, member_figures=False)
    assert len(again.skipped) == 2 and not again.batches


@pytest.mark.parametrize(
    ("param", "needle"),
    [
        ("task.nonexistent=1,2", "unknown field 'nonexistent'"),
        ("task.held_out_fraction=0.5,1.5", "'1.5'"),
        ("task.held_out_fraction=0.5,abc", "'abc'"),
        ("pair_fraction=0.5,x", "not a number"),
        ("seed=1,2", "--seeds"),
        ("task.held_out_fraction", "KEY=V1,V2"),
        ("task.held_out_fraction=0.5,0.5", "repeated"),
        ("task=1,2", "is a table"),
    ],
)
def test_bad_param_is_one_error_line_and_exit_2(tmp_path, capsys, param, needle):
    rc = sweep_main(["--config", str(SMOKE), "--param", param, "--out", str(tmp_path), *TINY])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert needle in err
    assert not (tmp_path / "members").exists()


def test_bad_metric_and_seeds_are_errors(tmp_path, capsys):
    common = ["--config", str(SMOKE), "--param", "pair_fraction=1,0.5", "--out", str(tmp_path)]
    assert sweep_main([*common, "--metric", "0var/everything"]) == 2
    assert sweep_main([*common, "--seeds", "0", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)


def test_architecture_params_are_batched_separately():
    key, values = parse_param("model.d_model=16,32")
    members = expand_members(tiny(), SweepSpec(param=key, values=values, seeds=[0, 1]))
    batches = plan_batches(members, {m.dirname: 0 for m in members}, max_batch=0)
    assert [[m.cfg.model.d_model for m in b] for b in batches] == [[16, 16], [32, 32]]
    split = plan_batches(members, {m.dirname: 0 for m in members}, max_batch=1)
    assert len(split) == 4
    # task fields that only change the data share a batch
    members = expand_members(
        tiny(), SweepSpec(param="task.ratio_2var_to_0var", values=[0, 0.5, 2], seeds=[0])
    )
    assert len(plan_batches(members, {m.dirname: 0 for m in members}, 0)) == 1
    with pytest.raises(ConfigError, match="cannot be swept"):
        parse_param("train.device=cpu,cuda")


def test_threshold_detection():
    xs = [0.2, 0.4, 0.6, 0.8, 1.0]
    got = find_threshold(xs, [0.1, 0.5, 0.995, 0.999, 1.0], 0.99)
    assert got["threshold"] == 0.6 and got["stable_threshold"] == 0.6 and got["monotone"]
    got = find_threshold(xs[::-1], [1.0, 0.999, 0.995, 0.5, 0.1], 0.99)  # unsorted input
    assert got["threshold"] == 0.6
    got = find_threshold(xs, [0.1, 0.995, 0.98, 0.999, 1.0], 0.99)  # a dip: not monotone
    assert got["threshold"] == 0.4 and got["stable_threshold"] == 0.8 and not got["monotone"]
    got = find_threshold(xs, [0.1, 0.2, 0.3, 0.995, 0.98], 0.99)  # the largest x fails
    assert got["threshold"] == 0.8 and got["stable_threshold"] is None
    assert find_threshold(xs, [1.0] * 5, 0.99)["threshold"] == 0.2
    got = find_threshold(xs, [0.1, 0.2, 0.3, 0.9, float("nan")], 0.99)
    assert got["threshold"] is None and got["stable_threshold"] is None


def test_derived_metrics_and_summary_files(tmp_path):
    cfg = tiny("task.held_out_fraction=0.5")
    w = MetricWeights(cfg)
    assert 0.4 < w.pair < 0.6
    acc = {"0var/ind": 1.0, "0var/pair": 0.0, "2var/ind": 1.0, "2var/pair": 1.0}
    acc |= {"2var/var": 0.0, "2var/both": 0.0}
    assert metric_value("0var/all", acc, w) == pytest.approx(1 - w.pair)
    assert metric_value("0var/pair", acc, w) == 0.0
    assert metric_value("2var/all", acc, w) == pytest.approx(1 - w.restricted["2var"])
    assert metric_value("2var/mean", acc, w) == 0.5
    # synthetic sweep: 3 seeds, the threshold lands at 0.6
    rows = []
    for x, base_acc in [(0.2, 0.3), (0.4, 0.8), (0.6, 0.995), (0.8, 0.999), (1.0, 1.0)]:
        for seed in range(3):
            value = min(1.0, base_acc + 0.002 * (seed - 1))
            rows.append(
                {
                    "member": f"m{x}_{seed}",
                    "value": x,
                    "x": x,
                    "seed": seed,
                    "final_step": 40,
                    "metric": value,
                    "aux": {"0var/pair": value / 2},
                    "final_acc": {},
                }
            )
    results = summarize(
        rows,
        param="pair_fraction",
        x_label="fraction of pairs",
        metric="0var/all",
        target=0.99,
        missing=[],
        title="synthetic sweep",
    )
    assert results["threshold"]["threshold"] == 0.6
    point = results["points"][1]
    assert point["n"] == 3 and point["mean"] == pytest.approx(0.8)
    assert point["min"] == pytest.approx(0.798) and point["max"] == pytest.approx(0.802)
    paths = write_report(results_report(results, "fig"), tmp_path)
    json_path, md_path, fig_path = paths["results.json"], paths["summary.md"], paths["fig"]
    assert json.loads(json_path.read_text())["threshold"]["threshold"] == 0.6
    assert "threshold 0.6" in md_path.read_text()
    assert fig_path.stat().st_size > 10_000


# ---- members that differ in lr / weight decay, chunked data, a diverging member


def test_member_adamw_equals_adamw_per_member():
    torch.manual_seed(0)
    lrs, wds = [1e-3, 3e-3, 1e-2], [1.0, 0.1, 0.0]
    stacked = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    singles = [stacked[m].detach().clone().requires_grad_(True) for m in range(3)]
    opt = MemberAdamW([stacked], lrs, wds, betas=(0.9, 0.98))
    refs = [
        torch.optim.AdamW([s], lr=lr, weight_decay=wd, betas=(0.9, 0.98))
        for s, lr, wd in zip(singles, lrs, wds, strict=True)
    ]
    for step in range(5):
        grad = torch.randn(3, 4, 5, dtype=torch.float64)
        scale = (step + 1) / 5  # a warm-up factor
        opt.set_lr_scale(scale)
        stacked.grad = grad.clone()
        opt.step()
        for m, (s, ref) in enumerate(zip(singles, refs, strict=True)):
            ref.param_groups[0]["lr"] = scale * lrs[m]
            s.grad = grad[m].clone()
            ref.step()
    for m, s in enumerate(singles):
        torch.testing.assert_close(stacked[m].detach(), s.detach(), rtol=1e-12, atol=1e-14)
        group = opt.member_param_group(m)
        assert group["lr"] == pytest.approx(lrs[m]) and group["weight_decay"] == wds[m]
    with pytest.raises(ValueError, match="weight decays"):
        MemberAdamW([stacked], [1e-3], [1.0, 2.0])


def test_members_differing_in_lr_and_weight_decay_batch_together_and_match_single_runs(
    tmp_path,
):
    # float64: the per-member update rounds differently from AdamW's fused one, and 40 steps
    # of training amplify float32 rounding past any tight tolerance
    f64 = "model.dtype=float64"
    cfgs = [tiny(f64), tiny(f64, "train.lr=0.003", "train.weight_decay=0.1", "seed=1")]
    spec = SweepSpec(param="train.weight_decay", values=[1.0, 0.1], seeds=[0])
    members = expand_members(tiny(), spec)
    assert len(plan_batches(members, {m.dirname: 0 for m in members}, 0)) == 1
    train_batch(
        [(c, tmp_path / f"batch{i}") for i, c in enumerate(cfgs)], progress=False, figures=False,
    )
    for i, cfg in enumerate(cfgs):
        train_run(cfg, tmp_path / f"single{i}", progress=False, figures=False)
        batched = read_metrics(tmp_path / f"batch{i}" / "metrics.jsonl")
        single = read_metrics(tmp_path / f"single{i}" / "metrics.jsonl")
        assert [r["step"] for r in batched] == [r["step"] for r in single] == [0, 20, 40]
        for rb, rs in zip(batched, single, strict=True):
            assert rb["lr"] == rs["lr"]
            for name in rs["acc"]:
                assert rb["acc"][name] == pytest.approx(rs["acc"][name], abs=1e-9)
                assert rb["loss"][name] == pytest.approx(rs["loss"][name], rel=1e-9)
        wb = load_training_state(tmp_path / f"batch{i}" / "checkpoints" / "last.pt")
        ws = load_training_state(tmp_path / f"single{i}" / "checkpoints" / "last.pt")
        for k, v in ws["model_state"].items():
            torch.testing.assert_close(wb["model_state"][k], v, rtol=1e-9, atol=1e-12)
        # the member's optimiser state is a single run's: its own lr and weight decay
        group = wb["optimizer_state"]["param_groups"][0]
        assert group["weight_decay"] == cfg.train.weight_decay
        assert group["lr"] == pytest.approx(cfg.train.lr)
    # a member directory resumes as a single run
    train_run(
        load_run_config(tmp_path / "batch1" / "config.toml", ["train.steps=60"]),
        tmp_path / "batch1",
        resume=True,
        progress=False,
    )
    assert [r["step"] for r in read_metrics(tmp_path / "batch1" / "metrics.jsonl")][-1] == 60


def test_batch_stream_chunks_are_slices_of_one_draw():
    cfg = tiny()
    sampler = TrainingSampler(cfg.task, held_out_pairs(cfg.task, 0))
    stream = BatchStream(sampler, training_generator(0, "cpu"), batch_size=16, chunk=3)
    got = [stream.next() for _ in range(6)]
    gen = training_generator(0, "cpu")
    draws = [sampler.sample(48, gen) for _ in range(2)]
    for i, batch in enumerate(got):
        assert batch.equal(draws[i // 3].slice(16 * (i % 3), 16 * (i % 3 + 1)))
    plain = BatchStream(sampler, training_generator(0, "cpu"), batch_size=16)
    assert plain.next().equal(sampler.sample(16, training_generator(0, "cpu")))


def test_chunked_run_resumes_bit_for_bit_and_chunk_is_validated(tmp_path):
    cfg = tiny("train.sample_chunk=4", "train.checkpoint_every=20", "train.eval_every=20")
    train_run(cfg, tmp_path / "whole", progress=False, figures=False)
    train_run(cfg, tmp_path / "split", progress=False, stop_at=20)
    train_run(cfg, tmp_path / "split", resume=True, progress=False, figures=False)
    whole = strip_time(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    assert whole == strip_time(read_metrics(tmp_path / "split" / "metrics.jsonl"))
    # on CPU the sampler turns one row of uniforms into one sequence, in order: drawing 4
    # steps at once is the very stream of drawing one step at a time
    plain = tiny("train.checkpoint_every=20", "train.eval_every=20")
    train_run(plain, tmp_path / "plain", progress=False, figures=False)
    assert whole == strip_time(read_metrics(tmp_path / "plain" / "metrics.jsonl"))
    with pytest.raises(ConfigError, match="checkpoint_every = 20 must be a multiple of"):
        tiny("train.sample_chunk=3", "train.checkpoint_every=20", "train.steps=60")
    with pytest.raises(ConfigError, match="train.steps = 40 must be a multiple of"):
        tiny("train.sample_chunk=3", "train.checkpoint_every=30")
    with pytest.raises(ConfigError, match="sample_chunk = 0"):
        tiny("train.sample_chunk=0")


def test_a_diverging_member_stops_alone(tmp_path):
    base = tiny()
    spec = SweepSpec(param="train.lr", values=[0.001, 1e30], seeds=[0], metric="0var/ind")
    out = run_sweep(base, spec, tmp_path / "sw", progress=False, log=None, member_figures=False)
    bad = tmp_path / "sw" / "members" / "lr=1e+30_seed0"
    good = tmp_path / "sw" / "members" / "lr=0.001_seed0"
    assert out.stopped == [bad.name]
    stop = json.loads((bad / "stopped.json").read_text())
    assert stop["step"] >= 1 and "train.lr" in stop["reason"]
    assert not (bad / "summary.json").exists()
    assert json.loads((good / "summary.json").read_text())["final_step"] == 40
    assert list(out.results["stopped_members"]) == [bad.name]
    assert not out.results["missing_members"]
    assert [r["member"] for r in out.results["members"]] == [good.name]
    assert "Stopped, not in the figure: lr=1e+30" in (tmp_path / "sw" / "summary.md").read_text()
    # a second call does not train the stopped member again
    again = run_sweep(base, spec, tmp_path / "sw", progress=False, log=None, member_figures=False)
    assert again.stopped == [bad.name] and again.skipped == [good.name] and not again.batches


def test_cosine_schedule_and_its_resume_rule(tmp_path):
    from empirical.train.loop import TrainingError
    from empirical.train.schedule import learning_rate

    assert learning_rate(0, 1.0, 0, "cosine", 100) == pytest.approx(1.0)
    assert learning_rate(50, 1.0, 0, "cosine", 100) == pytest.approx(0.5)
    assert learning_rate(99, 1.0, 0, "cosine", 100) == pytest.approx(0.000247, abs=1e-5)
    assert learning_rate(4, 1.0, 10, "cosine", 100) == pytest.approx(0.5)  # warm-up first
    assert learning_rate(10, 1.0, 10, "cosine", 100) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="lr_schedule = 'linear'"):
        tiny("train.lr_schedule=linear")
    cfg = tiny("train.lr_schedule=cosine")
    train_run(cfg, tmp_path, progress=False, stop_at=20)
    train_run(cfg, tmp_path, resume=True, progress=False, figures=False)
    lrs = [r["lr"] for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert lrs[1] > lrs[2] > 0  # decaying towards 0 at step 40
    with pytest.raises(TrainingError, match="decay is fixed by train.steps"):
        train_run(tiny("train.lr_schedule=cosine", "train.steps=60"), tmp_path, resume=True)


def test_mixed_hyperparameter_batch_resumes_bit_for_bit(tmp_path):
    # stopped at 30, inside the evaluation window 20-40 (a checkpoint every 10): the resumed
    # members' train_loss at 40 averages steps of both sessions
    every = "train.checkpoint_every=10"
    cfgs = [tiny(every), tiny(every, "train.lr=0.003", "train.weight_decay=0.1", "seed=1")]
    train_batch(
        [(c, tmp_path / f"whole{i}") for i, c in enumerate(cfgs)], progress=False, figures=False,
    )
    split = [(c, tmp_path / f"split{i}") for i, c in enumerate(cfgs)]
    train_batch(split, progress=False, stop_at=30)
    train_batch(split, progress=False, figures=False)
    for i in range(2):
        whole = strip_time(read_metrics(tmp_path / f"whole{i}" / "metrics.jsonl"))
        assert whole == strip_time(read_metrics(tmp_path / f"split{i}" / "metrics.jsonl"))
        a, b = final_weights(tmp_path / f"whole{i}"), final_weights(tmp_path / f"split{i}")
        assert all(torch.equal(a[k], b[k]) for k in a)
