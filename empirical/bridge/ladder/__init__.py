"""The assumption ladder from Theorem C.1's model to a trained snapshot (issue 20, item 2):
a sequence of real `AssignAddTransformer`s, each differing from the one before in one named
piece, with the layer-2 key-query gradient against G1 and the one-step test at every rung.
See docs/ladder.md.

    from empirical.bridge.ladder import LadderOptions, run_ladder, write_outputs
    result = run_ladder("runs/authors", LadderOptions(step=5301))
    write_outputs(result, "runs/authors/ladder/step_005301")   # ladder.json, summary.md, PNG
"""

from empirical.bridge.ladder.outputs import write_outputs
from empirical.bridge.ladder.rungs import CHANGED, PIECES, RUNG_NAMES
from empirical.bridge.ladder.snapshot_ladder import LadderOptions, run_ladder

__all__ = ["CHANGED", "LadderOptions", "PIECES", "RUNG_NAMES", "run_ladder", "write_outputs"]
