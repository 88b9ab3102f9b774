"""The assumption ladder from Theorem C.1's model to a trained snapshot (issue 20, item 2;
docs/ladder.md): real models, each differing from the one before in one named piece.

    from empirical.bridge.ladder.options import LadderOptions
    from empirical.bridge.ladder.outputs import report
    from empirical.bridge.ladder.snapshot_ladder import run_ladder
    from empirical.report.writer import write_report
    result = run_ladder("runs/authors", LadderOptions(step=5301))
    write_report(report(result), "runs/authors/ladder/step_005301")  # ladder.json, summary.md, ...

Modules: options (what the ladder varies, the command's flags; no torch), rungs (the rungs
and the pieces they change), weights, forward, measure, snapshot_ladder (`run_ladder`),
outputs (the files: `report`).
"""

__all__ = ["forward", "measure", "options", "outputs", "rungs", "snapshot_ladder", "weights"]
