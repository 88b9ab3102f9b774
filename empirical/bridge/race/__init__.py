"""The race (issue 36, item 2; docs/race.md): a step-0 criterion (the memory's time T_mem
against the inputs' time T_in) that predicts whether a dynamics-ladder configuration composes
2-var, tested on the race's configurations (tau fitted on the fit half, the test half reported).

    from empirical.bridge.race.run import run_race

    from empirical.bridge.race.configs import select

    from empirical.bridge.race.outputs import write_outputs
    write_outputs(run_race(select(None), "runs/race"), "runs/race")
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "RaceConfig",
    "StepZero",
    "fit_tau",
    "predict",
    "race_configs",
    "run_race",
    "select",
    "split_of",
    "step_zero",
    "write_outputs",
]
# imported on first use: the configurations (and the CLI's checks of them) load without torch
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.bridge.race.configs": ["RaceConfig", "race_configs", "select", "split_of"],
        "empirical.bridge.race.criterion": ["StepZero", "predict", "step_zero"],
        "empirical.bridge.race.fit": ["fit_tau"],
        "empirical.bridge.race.outputs": ["write_outputs"],
        "empirical.bridge.race.run": ["run_race"],
    },
)
