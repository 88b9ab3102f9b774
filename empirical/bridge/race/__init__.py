"""The race (issue 36, item 2; docs/race.md): a step-0 criterion (the memory's time T_mem
against the inputs' time T_in) that predicts whether a dynamics-ladder configuration composes
2-var, tested on the race's configurations (tau fitted on the fit half, the test half reported).

    from empirical.bridge.race.configs import select
    from empirical.bridge.race.outputs import report
    from empirical.bridge.race.run import run_race
    from empirical.report.writer import write_report
    write_report(report(run_race(select(None), "runs/race")), "runs/race")

Modules: configs (`RaceConfig`, the configurations; no torch), options (the command's flags;
no torch), criterion (`step_zero`, `predict`), fit (`fit_tau`), run (`run_race`), outputs (the
files: `report`).
"""

__all__ = ["configs", "criterion", "fit", "options", "outputs", "run"]
