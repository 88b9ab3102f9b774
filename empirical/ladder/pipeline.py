"""The assumption ladder of one snapshot of a run: every rung's gradient against G1 and its
one-step test (docs/ladder.md).

    from empirical.ladder import LadderOptions, run_ladder, write_outputs
    result = run_ladder("runs/authors", LadderOptions(step=5301))
    write_outputs(result, "runs/authors/ladder/step_005301")
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from disentangled.command_line import UsageError
from empirical.compare_qk.coords import theorem_w
from empirical.compare_qk.observe import layer2_attention, one_var_batch
from empirical.compare_qk.pipeline import Options, make_predictor, one_step_default
from empirical.compare_qk.prediction import beta_from_ab
from empirical.ladder.forward import Forward, hooked_logits, qk_gradient
from empirical.ladder.measure import EvalCache, gradient_measures, one_step
from empirical.ladder.rungs import CHANGED, DESCRIPTION, Rung, build_rungs
from empirical.ladder.weights import Merged, build_model
from empirical.rundir import RunDir, RunDirError

DEFAULT_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


@dataclasses.dataclass
class LadderOptions:
    """step: the snapshot (None: the last before the first spike's jump, as compare-qk picks
    it); batch_size: 1-var sequences per rung's gradient; prediction_size: sequences of G1's
    sampled population (compare-qk's); eval_size: sequences per evaluation set in the one-step
    test (None: all); grid: step sizes (RMS change of `=`'s layer-2 scores); seed: data seed;
    hooked_check: sequences on which each rung's forward is checked against its model's own
    hooked forward."""

    step: int | None = None
    batch_size: int = 4096
    prediction_size: int = 65536
    eval_size: int | None = 1000
    grid: tuple[float, ...] = DEFAULT_GRID
    seed: int = 0
    hooked_check: int = 64
    eval_sets: tuple[str, ...] | None = None  # evaluation sets of the one-step test (None: all)
    progress: bool = True


def _load(path):
    from empirical.model import load_model

    model = load_model(path)
    model.eval()
    return model


def choose_step(run, opts: LadderOptions) -> tuple[int, str, list[int], dict]:
    """(step, rule, snapshot steps, {step: path}); UsageError / RunDirError for a run without
    snapshots or a step that is not one."""
    from empirical.train.phases import detect_phases

    snaps = run.snapshots()
    if not snaps:
        raise RunDirError(f"{run}: no snapshots (train with train.snapshot_every > 0)")
    steps = [s for s, _ in snaps]
    by_step = dict(snaps)
    if opts.step is not None:
        if opts.step not in by_step:
            raise UsageError(f"--step {opts.step}: no snapshot there; available: {steps}")
        return opts.step, "--step", steps, by_step
    records = run.read_metrics()
    phases = detect_phases(records).to_dict() if records else None
    at, rule = one_step_default(records, phases, steps)
    if at is None:
        raise UsageError(
            f"{run}: no first spike and no snapshot with 0var/ind >= 0.9 to pick a default "
            "step from; pass --step"
        )
    return at, rule, steps, by_step


def _centred_rms(logits: torch.Tensor) -> float:
    c = logits - logits.mean(dim=-1, keepdim=True)
    return float(c.pow(2).mean().sqrt())


def _hooked_check(rung: Rung, tokens, p, K, L) -> float:
    """max |rung forward - its model's hooked forward| over `tokens` (last position)."""
    model = build_model(rung.w, p, K, L)
    fwd = Forward(rung.w, rung.routing, p, K)
    hooked = hooked_logits(model, tokens, rung.routing, p, K)
    return float((fwd.logits(tokens) - hooked).abs().max())


def run_ladder(run_dir, opts: LadderOptions | None = None) -> dict:
    """Every number of the ladder at one snapshot of `run_dir` (module docstring)."""
    from empirical.task import held_out_pairs

    opts = opts or LadderOptions()
    t0 = time.time()
    run = RunDir(run_dir).require_run()
    cfg = run.read_two_layer_config("ladder")
    task = cfg.task
    p, K, L = task.p, task.K, task.L
    step, rule, snap_steps, by_step = choose_step(run, opts)
    sets = run.read_eval_sets(cfg)
    if sets is None:
        from empirical.task import build_eval_sets

        sets = build_eval_sets(task, cfg.seed)
    if opts.eval_sets is not None:
        unknown = [n for n in opts.eval_sets if n not in sets]
        if unknown:
            raise UsageError(f"evaluation sets {unknown} are not this run's: {list(sets)}")
        sets = {n: sets[n] for n in opts.eval_sets}
    if opts.eval_size:
        sets = {n: b.slice(0, opts.eval_size) for n, b in sets.items()}

    def say(msg):
        if opts.progress:
            print(f"[ladder] {time.time() - t0:6.1f}s {msg}", flush=True)

    trained = _load(by_step[step])
    later = [s for s in snap_steps if s > step]
    held = held_out_pairs(task, cfg.seed)
    run_batch = one_var_batch(task, opts.batch_size, opts.seed, "mixed", "train", held)
    th_batch = one_var_batch(task, opts.batch_size, opts.seed, "fixed", "unrestricted")
    mixed_batch = one_var_batch(task, opts.batch_size, opts.seed, "mixed", "unrestricted")
    batches = {"run": run_batch, "theorem": th_batch, "mixed": mixed_batch}
    # G1 of the theorem's model on a sample of each rung's distribution (compare-qk's
    # PopulationG1; the closed form needs all K variables assigned, impossible at K = 12)
    popts = {"prediction_size": opts.prediction_size, "seed": opts.seed,
             "prediction": "population"}  # fmt: skip
    predictors = {
        "run": make_predictor(task, Options(order="mixed", distribution="train", **popts),
                              held_out=held),
        "theorem": make_predictor(task, Options(order="fixed", distribution="unrestricted",
                                                **popts)),
        "mixed": make_predictor(task, Options(order="mixed", distribution="unrestricted",
                                              **popts)),
    }  # fmt: skip
    orders = {"run": "mixed", "theorem": "fixed", "mixed": "mixed"}
    say(f"step {step} ({rule}); G1 predictors ready")

    # the trained model's attention -> W^0's beta; its logit scale -> the 'loss' rung's xi
    tw = Merged.of(trained)
    tf = Forward(tw, False, p, K)
    r1 = tf.resid1(run_batch.tokens)
    with torch.no_grad():
        t_logits, t_pat = tf.head(r1)
    att = layer2_attention(t_pat, run_batch, p, K)
    a_t, b_t = att["a_operands"], att["b_operands"]
    beta = beta_from_ab(a_t, b_t)
    rungs = build_rungs(trained, p, K, L, beta, 1.0)
    f_logits = Forward(rungs[0].w, True, p, K).logits(run_batch.tokens)  # xi = 1: F
    xi = _centred_rms(t_logits) / _centred_rms(f_logits)
    rungs = build_rungs(trained, p, K, L, beta, xi)
    say(f"rungs built (beta {beta:.3f}, xi {xi:.3f})")

    result = {
        "step": step, "run": str(run.path), "rule": rule, "next_step": later[0] if later else None,
        "task": {"p": p, "K": K, "L": L}, "beta": beta, "xi": xi,
        "trained_attention": {"a": a_t, "b": b_t},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "progress"},
        "frame": "dual", "eval_sets": {n: len(b) for n, b in sets.items()}, "rungs": [],
    }  # fmt: skip
    check_tokens = run_batch.tokens[: opts.hooked_check]
    extra = []
    if later:
        nxt = _load(by_step[later[0]])
        diff = (theorem_w(nxt) - theorem_w(trained)) * (rungs[-1].w.scale / tw.scale)
        extra.append(("optimiser", diff))
    for rung in [*rungs, *[None for _ in extra]]:
        if rung is None:
            name, direction = extra.pop(0)
            rung = dataclasses.replace(
                rungs[-1], name=name,
                pieces={**rungs[-1].pieces, "update": "trained"},
                notes=f"the update W_QK({later[0]}) - W_QK({step}) (AdamW, weight decay, the "
                "whole 0/1/2-var mix) in place of the gradient; same model as 'trained'",
            )  # fmt: skip
        else:
            direction = None
        batch = batches[rung.data]
        fwd = Forward(rung.w, rung.routing, p, K)
        resid1 = fwd.resid1(batch.tokens)
        loss, g, pattern = qk_gradient(fwd, resid1, batch.labels, rung.loss)
        att = layer2_attention(pattern, batch, p, K)
        a, b = att["a_operands"], att["b_operands"]
        valid = 0 < a < 0.5 and b > 0
        G1 = predictors[rung.data](a, b) if valid else None
        own = -g if direction is None else direction
        entry = {
            "name": rung.name, "changed": CHANGED[rung.name],
            "description": DESCRIPTION[rung.name], "notes": rung.notes,
            "pieces": rung.pieces, "loss": rung.loss, "data": rung.data,
            "layer1": "theorem routing (hook_pattern)" if rung.routing else "softmax head",
            "d_model": rung.w.d_model, "loss_value": loss, "a": a, "b": b,
            "hooked_max_abs_diff": _hooked_check(rung, check_tokens, p, K, L),
        }  # fmt: skip
        if G1 is None:
            entry["skipped"] = f"a = {a}: G1(a, b) needs 0 < a < 1/2"
            result["rungs"].append(entry)
            continue
        gm = gradient_measures(rung.coords, own, G1, orders[rung.data], L)
        blocks = {"obs": gm.pop("obs_block"), "pred": gm.pop("pred_block")}
        entry.update(gm)
        cache = EvalCache(fwd, sets)
        entry["before"] = cache.accuracy(fwd.w.QK2)
        entry["one_step"] = one_step(cache, fwd, resid1, own, opts.grid)
        entry["g1_step"] = one_step(cache, fwd, resid1, rung.coords.gradient_of(G1), opts.grid)
        entry["_blocks"] = blocks
        if rung.name == "trained":
            entry["_grad_ce"] = g
        result["rungs"].append(entry)
        os_, g1 = entry["one_step"], entry["g1_step"]
        key = "2var/ind" if "2var/ind" in entry["before"] else sorted(entry["before"])[0]
        say(
            f"{rung.name:10s} cos whole {gm['cos_whole']:+.3f} bar_v {gm['cos_bar_v']:+.3f} | "
            f"{key} before {entry['before'][key]:.3f} own step "
            f"{os_['accuracy'].get(key, np.nan):.3f} G1 step {g1['accuracy'].get(key, np.nan):.3f}"
        )
    result["labels"] = {"rows": rungs[0].coords.rows, "cols": rungs[0].coords.cols}
    result["elapsed_s"] = time.time() - t0
    return result
