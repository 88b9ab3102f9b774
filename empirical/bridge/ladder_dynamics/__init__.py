"""The dynamics ladder (issue 20, item 3; docs/ladder.md): Theorem C.1's model trained as a
transformer, as the theorem has it, then with one constraint released at a time.

    from empirical.bridge.ladder_dynamics.config import DynamicsConfig
    from empirical.bridge.ladder_dynamics.outputs import report
    from empirical.bridge.ladder_dynamics.train_variants import run_ladder_dynamics
    from empirical.config.io import load_config
    from empirical.report.writer import write_report
    cfg = load_config(DynamicsConfig, "configs/ladder_dynamics.toml", ["steps=100"])
    write_report(report(run_ladder_dynamics(cfg), cfg), "runs/ladder_dynamics")

Modules: config (`DynamicsConfig`; no torch), options (the command's flags; no torch),
variants, restrict, trainer (`Context`, `train_run`), onestep, train_variants
(`run_ladder_dynamics`), outputs (the files: `report`).
"""

__all__ = [
    "config", "onestep", "options", "outputs", "restrict", "train_variants", "trainer",
    "variants",
]  # fmt: skip
