"""What a comparison can vary: `Options`, the CLI flags of `python -m empirical compare-qk`
(docs/compare_qk.md)."""

from __future__ import annotations

import dataclasses

from empirical.bridge.compare_qk.frames import DEFAULT_FRAME


@dataclasses.dataclass
class Options:
    """Everything `compare_run` can vary (CLI flags of `python -m empirical compare-qk`)."""

    steps: list[int] | None = None  # snapshot steps (None: all)
    every: int = 1  # use every N-th of those
    batch_size: int = 4096  # 1-var sequences for the gradients and the attention measures
    order: str = "mixed"  # 'mixed' (either operand order, as trained) or 'fixed' (theorem's)
    distribution: str = "train"  # the run's 1-var restrictions, or 'unrestricted' (theorem's)
    frame: str = DEFAULT_FRAME  # headline frame: 'dual' (exact), 'score', 'orth', 'raw'
    null_draws: int = 1000  # sign-randomised null: random sign patterns per snapshot
    all_assigned: bool = False  # every variable assigned (the theorem's sequences)
    ab_from: str = "operands"  # a from attention to the operand positions, or 'values'
    layout: str = "averaged"  # prediction's assignment-region columns: 'averaged' or 'packed'
    seed: int = 0  # data seed of the comparison's batch
    one_step: bool = True
    one_step_at: int | None = None  # snapshot step (None: first with 0var/ind >= 0.9)
    one_step_lrs: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    one_step_steps: int = 1  # plain SGD steps per learning rate
    score_steps: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)  # RMS score change
    one_step_order: str = "mixed"  # 1-var data of the one-step test: the task's operand orders
    one_step_distribution: str = "train"  # ... and the run's own training restrictions
    eval_size: int | None = 5000  # sequences per evaluation set in the one-step test (None: all)
    prediction: str = "auto"  # G1: 'closed' (theory's closed form), 'population' (sampled)
    prediction_size: int = 65536  # sequences of the sampled population ('population')
    windows: list[tuple[str, int, int]] | None = None  # (name, lo, hi); None: from the phases
    progress: bool = True
