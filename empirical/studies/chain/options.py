"""The options of the chain family's commands, each declared once (empirical.config.options)
and checked before torch is imported: `ChainAttentionOptions` (chain-attention),
`ChainPatchingOptions` (chain-patching), and `ChainCompareConfig` (what `compare_chain_run`
varies) with `ChainCompareQKOptions` (chain-compare-qk: the same and the command's own)."""

from __future__ import annotations

from disentangled.command_line import UsageError
from empirical.bridge.compare_qk.options import DEFAULT_FRAME, FRAMES
from empirical.config.field_types import MUST, Flag, checked, choice, fail, integer, number
from empirical.config.field_types import split_list as _split
from empirical.config.options import arg, options_class
from empirical.runs.rundir import RunDir

__all__ = ["ChainAttentionOptions", "ChainCompareConfig", "ChainCompareQKOptions",
           "ChainPatchingOptions", "ChainRunOptions"]  # fmt: skip

Sequences = integer(1, wording=MUST)  # how many sequences of a set
Step = integer(0, wording=MUST) | None  # a snapshot step (None: the latest weights)


@options_class("chain-attention", "Attention onto the chain construction's targets, per layer.")
class ChainRunOptions:
    """What the chain commands that read one model share: the run, the set, how many of its
    sequences, which step. `check`: a chain run (the set is checked against the run's
    evaluation sets when they are loaded)."""

    run_dir: str = arg(help="a run directory of the chain family (task.family = chain)",
                       positional=True)  # fmt: skip
    set: str = arg("chain/1var_h2", help="evaluation set", raw=True)
    n: Sequences = arg(500, help="sequences of the set")
    step: Step = arg(None, help="a snapshot step (default: the latest weights)")

    def check(self) -> None:
        RunDir(self.run_dir).require_family("chain", self.__prog__)


@options_class("chain-attention", "Attention onto the chain construction's targets, per layer.")
class ChainAttentionOptions(ChainRunOptions):
    """`python -m empirical chain-attention RUN_DIR [...]`."""

    over_training: Flag = arg(
        False, help="also the key measures at every snapshot (a figure over steps)")


@options_class("chain-patching", "Activation patching: which layer carries which hop.")
class ChainPatchingOptions(ChainRunOptions):
    """`python -m empirical chain-patching RUN_DIR [...]`."""

    seed: integer(0, wording=MUST) = arg(0, help="the number corruption's draws")


def _set_names(value):
    items = _split(value)
    if not isinstance(items, (list, tuple)) or not items:
        raise fail("give at least one evaluation set")
    return tuple(items)


@options_class("chain-compare-qk", "The two-hop theory's QK updates vs a chain run's snapshots.")
class ChainCompareConfig:
    """What `compare_chain_run` reads: the evaluation sets the theory and the gradients use
    (equal weights) and how many sequences of each; the set whose chains the attention
    measures follow (2-hop: the middle hop's target is the pointer's right-hand side, the
    last hop's the number); the frame (bridge/compare_qk/frames: 'dual' is exact); the
    fraction of a measure's rise that marks its formation (`attention.formation_steps`).
    Each field but `fraction` is a flag of chain-compare-qk."""

    sets: checked(tuple[str, ...], _set_names) = arg(
        ("chain/1var_h1", "chain/1var_h2"), raw=True,
        help="evaluation sets the theory and the gradients are evaluated on, equal weights")
    attention_set: str = arg("chain/1var_h2", raw=True,
                             help="set whose chains the formation measures follow")  # fmt: skip
    n: Sequences = arg(400, help="sequences per set")
    frame: choice(*FRAMES) = arg(
        DEFAULT_FRAME, help="how updates are read (docs/compare_qk.md; dual: exact)")
    fraction: number(0, 1, lo_open=True) = 0.5


@options_class("chain-compare-qk", "The two-hop theory's QK updates vs a chain run's snapshots.")
class ChainCompareQKOptions(ChainCompareConfig):
    """`python -m empirical chain-compare-qk RUN_DIR [...]`: a comparison's options and the
    command's."""

    run_dir: str = arg(help="a chain-family run directory with snapshots, >= 3 layers",
                       positional=True)  # fmt: skip
    out: str | None = arg(None, help="output directory (default "
                          "RUN_DIR/analysis/chain_compare_qk)", raw=True)  # fmt: skip
    format: choice("table", "json") = arg(
        "table", help="what to print: the markdown summary (table) or the JSON")

    def check(self) -> None:
        """A chain run of >= 3 layers with >= 2 snapshots (the sets are checked against the
        run's evaluation sets when they are loaded)."""
        run = RunDir(self.run_dir).require_family("chain", "chain-compare-qk")
        layers = run.read_config().model.n_layers
        if layers < 3:
            raise UsageError(f"{run}: model.n_layers = {layers}; the two-hop comparison needs "
                             ">= 3 layers (a middle and a last hop)")  # fmt: skip
        steps = run.snapshot_steps()
        if len(steps) < 2:
            raise UsageError(f"{run}: {len(steps)} snapshot(s); the comparison needs >= 2 "
                             "(train with train.snapshot_every > 0)")  # fmt: skip
