"""The assumption ladder from Theorem C.1's model to a trained snapshot (issue 20, item 2;
docs/ladder.md): real models, each differing from the one before in one named piece.

    from empirical.bridge.ladder.snapshot_ladder import LadderOptions, run_ladder

    from empirical.bridge.ladder.outputs import write_outputs
    result = run_ladder("runs/authors", LadderOptions(step=5301))
    write_outputs(result, "runs/authors/ladder/step_005301")   # ladder.json, summary.md, PNG
"""

from empirical.bridge.ladder.outputs import write_outputs
from empirical.bridge.ladder.rungs import CHANGED, PIECES, RUNG_NAMES
from empirical.bridge.ladder.snapshot_ladder import LadderOptions, run_ladder

__all__ = ["CHANGED", "LadderOptions", "PIECES", "RUNG_NAMES", "run_ladder", "write_outputs"]
