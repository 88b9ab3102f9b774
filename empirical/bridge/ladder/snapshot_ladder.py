"""The assumption ladder of one snapshot of a run: every rung's gradient against G1 and its
one-step test (docs/ladder.md).

    result = run_ladder("runs/authors", LadderOptions(step=5301))
    write_report(outputs.report(result), "runs/authors/ladder/step_005301")
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from disentangled.errors import UsageError
from empirical.bridge.compare_qk.coords import theorem_w
from empirical.bridge.compare_qk.observe import layer2_attention, one_var_batch
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.prediction import beta_from_ab, make_predictor
from empirical.bridge.compare_qk.run_comparison import one_step_default
from empirical.bridge.ladder.forward import Forward, hooked_logits, qk_gradient
from empirical.bridge.ladder.measure import EvalCache, first_set, gradient_measures, one_step
from empirical.bridge.ladder.options import LadderOptions
from empirical.bridge.ladder.rungs import CHANGED, DESCRIPTION, Rung, build_rungs
from empirical.bridge.ladder.weights import Merged, build_model
from empirical.model.checkpoint import load_model
from empirical.runs.phases import detect_phases
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.eval_sets import build_eval_sets
from empirical.task.pairs import held_out_pairs


def choose_step(run, opts: LadderOptions) -> tuple[int, str, list[int], dict]:
    """(step, rule, snapshot steps, {step: path}); UsageError / RunDirError for a run without
    snapshots or a step that is not one."""
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


def ladder_sets(run: RunDir, cfg, opts: LadderOptions) -> dict:
    """The evaluation sets of the one-step test: the run's saved sets (built from its config
    where absent), opts.eval_sets of them, the first opts.eval_size sequences of each."""
    sets = run.read_eval_sets(cfg)
    if sets is None:
        sets = build_eval_sets(cfg.task, cfg.seed)
    if opts.eval_sets is not None:
        unknown = [n for n in opts.eval_sets if n not in sets]
        if unknown:
            raise UsageError(f"evaluation sets {unknown} are not this run's: {list(sets)}")
        sets = {n: sets[n] for n in opts.eval_sets}
    if opts.eval_size:
        sets = {n: b.slice(0, opts.eval_size) for n, b in sets.items()}
    return sets


# a rung's data: (operand order, distribution) of its 1-var batch and of its G1
DATA = {"run": ("mixed", "train"), "theorem": ("fixed", "unrestricted"),
        "mixed": ("mixed", "unrestricted")}  # fmt: skip


def data_and_predictors(task, opts: LadderOptions, held) -> tuple[dict, dict]:
    """({data: 1-var batch}, {data: (a, b) -> G1}) for each rung's data (`DATA`): G1 of the
    theorem's model on a sample of that distribution (compare-qk's PopulationG1; the closed
    form needs all K variables assigned, impossible at K = 12). held: the run's held-out
    pairs, of the 'run' data."""
    held_of = {"run": held, "theorem": None, "mixed": None}
    batches = {
        data: one_var_batch(task, opts.batch_size, opts.seed, order, dist, held_of[data])
        for data, (order, dist) in DATA.items()
    }
    popts = {"prediction_size": opts.prediction_size, "seed": opts.seed,
             "prediction": "population"}  # fmt: skip
    predictors = {
        data: make_predictor(task, Options(order=order, distribution=dist, **popts),
                             held_out=held_of[data])
        for data, (order, dist) in DATA.items()
    }  # fmt: skip
    return batches, predictors


@dataclass
class Calibration:
    """What the ladder takes from the trained model's forward on the run's batch: W^0's beta
    (from its attention a, b) and the 'loss' rung's logit scale xi; the rungs built with
    them."""

    a: float
    b: float
    beta: float
    xi: float
    rungs: list[Rung]


def calibrate(trained, run_batch, p: int, K: int, L: int) -> Calibration:
    """The trained model's attention -> W^0's beta; its logit scale -> the 'loss' rung's xi
    (RMS of its centred logits / RMS of the theorem's F's on the batch)."""
    tf = Forward(Merged.of(trained), False, p, K)
    r1 = tf.resid1(run_batch.tokens)
    with torch.no_grad():
        t_logits, t_pat = tf.head(r1)
    att = layer2_attention(t_pat, run_batch, p, K)
    a_t, b_t = att["a_operands"], att["b_operands"]
    beta = beta_from_ab(a_t, b_t)
    rungs = build_rungs(trained, p, K, L, beta, 1.0)
    f_logits = Forward(rungs[0].w, True, p, K).logits(run_batch.tokens)  # xi = 1: F
    xi = _centred_rms(t_logits) / _centred_rms(f_logits)
    return Calibration(a_t, b_t, beta, xi, build_rungs(trained, p, K, L, beta, xi))


def optimiser_rung(trained, rung: Rung, nxt, step: int, next_step: int) -> tuple[Rung, Tensor]:
    """(the 'optimiser' rung, its direction): the 'trained' rung with the AdamW update
    W_QK(next) - W_QK(step) (at the rung's score scale) in place of the gradient."""
    diff = (theorem_w(nxt) - theorem_w(trained)) * (rung.w.scale / Merged.of(trained).scale)
    rung = dataclasses.replace(
        rung, name="optimiser",
        pieces={**rung.pieces, "update": "trained"},
        notes=f"the update W_QK({next_step}) - W_QK({step}) (AdamW, weight decay, the "
        "whole 0/1/2-var mix) in place of the gradient; same model as 'trained'",
    )  # fmt: skip
    return rung, diff


def measure_rung(rung: Rung, direction, batches, predictors, sets, opts, task) -> dict:
    """One rung's entry: its gradient (or `direction`, None: the gradient) against G1 of its
    own data at its own a, b, and the one-step test along it and along G1."""
    p, K, L = task.p, task.K, task.L
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
        "hooked_max_abs_diff": _hooked_check(
            rung, batches["run"].tokens[: opts.hooked_check], p, K, L
        ),
    }  # fmt: skip
    if G1 is None:
        entry["skipped"] = f"a = {a}: G1(a, b) needs 0 < a < 1/2"
        return entry
    gm = gradient_measures(rung.coords, own, G1, DATA[rung.data][0], L)
    blocks = {"obs": gm.pop("obs_block"), "pred": gm.pop("pred_block")}
    entry.update(gm)
    cache = EvalCache(fwd, sets)
    entry["before"] = cache.accuracy(fwd.w.QK2)
    entry["one_step"] = one_step(cache, fwd, resid1, own, opts.grid)
    entry["g1_step"] = one_step(cache, fwd, resid1, rung.coords.gradient_of(G1), opts.grid)
    entry["_blocks"] = blocks
    if rung.name == "trained":
        entry["_grad_ce"] = g
    return entry


def _progress_line(entry: dict) -> str:
    os_, g1 = entry["one_step"], entry["g1_step"]
    key = first_set(entry["before"])
    return (
        f"{entry['name']:10s} cos whole {entry['cos_whole']:+.3f} bar_v "
        f"{entry['cos_bar_v']:+.3f} | {key} before {entry['before'][key]:.3f} own step "
        f"{os_['accuracy'].get(key, np.nan):.3f} G1 step {g1['accuracy'].get(key, np.nan):.3f}"
    )


def run_ladder(run_dir, opts: LadderOptions | None = None) -> dict:
    """Every number of the ladder at one snapshot of `run_dir` (module docstring)."""
    opts = opts or LadderOptions()
    t0 = time.time()
    run = RunDir(run_dir).require_run()
    cfg = run.read_two_layer_config("ladder")
    task = cfg.task
    p, K, L = task.p, task.K, task.L
    step, rule, snap_steps, by_step = choose_step(run, opts)
    sets = ladder_sets(run, cfg, opts)

    def say(msg):
        if opts.progress:
            print(f"[ladder] {time.time() - t0:6.1f}s {msg}", flush=True)

    trained = load_model(by_step[step])
    later = [s for s in snap_steps if s > step]
    batches, predictors = data_and_predictors(task, opts, held_out_pairs(task, cfg.seed))
    say(f"step {step} ({rule}); G1 predictors ready")
    cal = calibrate(trained, batches["run"], p, K, L)
    say(f"rungs built (beta {cal.beta:.3f}, xi {cal.xi:.3f})")
    result = {
        "step": step, "run": str(run.path), "rule": rule, "next_step": later[0] if later else None,
        "task": {"p": p, "K": K, "L": L}, "beta": cal.beta, "xi": cal.xi,
        "trained_attention": {"a": cal.a, "b": cal.b},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "progress"},
        "frame": "dual", "eval_sets": {n: len(b) for n, b in sets.items()}, "rungs": [],
    }  # fmt: skip
    todo = [(rung, None) for rung in cal.rungs]
    if later:
        nxt = load_model(by_step[later[0]])
        todo.append(optimiser_rung(trained, cal.rungs[-1], nxt, step, later[0]))
    for rung, direction in todo:
        entry = measure_rung(rung, direction, batches, predictors, sets, opts, task)
        result["rungs"].append(entry)
        if "skipped" not in entry:
            say(_progress_line(entry))
    result["labels"] = {"rows": cal.rungs[0].coords.rows, "cols": cal.rungs[0].coords.cols}
    result["elapsed_s"] = time.time() - t0
    return result
