"""Theorem C.1's predicted layer-2 key-query update against trained checkpoints.

    from empirical.compare_qk import compare_run, write_outputs, Options
    result = compare_run("runs/paper/seed0", Options(steps=[1000, 2000]))
    write_outputs(result, "runs/paper/seed0/compare_qk")

Pieces: `coords` (labelled query/key vectors of a checkpoint, its raw / orth / dual readings,
projection and lift), `frames` (the comparison's frames: 'dual', the exact default, 'score',
and the legacy 'orth' and 'raw'), `prediction` (the theory's G1 at measured a, b: closed form,
or the theorem's model on a sample of the run's distribution), `observe` (gradients,
attention, assumption measures), `updates` (the decay-only update, the score-change split),
`metrics` (cosines, identity scores, attenuation signs, null levels), `pipeline` (per snapshot
and the one-step test), `report` / `plots` (files). See docs/compare_qk.md.
"""

from empirical.compare_qk.coords import Coordinates, coordinates, lowdin, set_qk, theorem_w
from empirical.compare_qk.frames import DEFAULT_FRAME, FRAMES, Frames
from empirical.compare_qk.metrics import (
    barv_block,
    cosine,
    identity_score,
    sign_agreement,
    subblock_cosines,
)
from empirical.compare_qk.observe import gradients, layer1, layer2, one_var_batch
from empirical.compare_qk.pipeline import (
    Options,
    analyse_snapshot,
    compare_run,
    one_step_experiment,
)
from empirical.compare_qk.prediction import ab_from_beta, beta_from_ab, g1_block
from empirical.compare_qk.report import summary_markdown, write_outputs

__all__ = [
    "DEFAULT_FRAME",
    "FRAMES",
    "Coordinates",
    "Frames",
    "Options",
    "ab_from_beta",
    "analyse_snapshot",
    "barv_block",
    "beta_from_ab",
    "compare_run",
    "coordinates",
    "cosine",
    "g1_block",
    "gradients",
    "identity_score",
    "layer1",
    "layer2",
    "lowdin",
    "one_step_experiment",
    "one_var_batch",
    "theorem_w",
    "set_qk",
    "sign_agreement",
    "subblock_cosines",
    "summary_markdown",
    "write_outputs",
]
