"""The dynamics ladder (issue 20, item 3; docs/ladder.md): Theorem C.1's model trained as a
transformer, as the theorem has it, then with one constraint released at a time.

    from empirical.config.io import load_config
    from empirical.bridge.ladder_dynamics.config import DynamicsConfig
    from empirical.bridge.ladder_dynamics.train_variants import run_ladder_dynamics
    from empirical.bridge.ladder_dynamics.outputs import write_outputs
    cfg = load_config(DynamicsConfig, "configs/ladder_dynamics.toml", ["steps=100"])
    write_outputs(run_ladder_dynamics(cfg), "runs/ladder_dynamics", cfg)
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "RELEASES",
    "Context",
    "DynamicsConfig",
    "composing_step",
    "first_update_check",
    "run_ladder_dynamics",
    "train_run",
    "ladder_variants",
    "write_outputs",
]
# imported on first use: the config (and the CLI's checks of it) load without torch
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.bridge.ladder_dynamics.config": ["RELEASES", "DynamicsConfig"],
        "empirical.bridge.ladder_dynamics.onestep": ["composing_step", "first_update_check"],
        "empirical.bridge.ladder_dynamics.outputs": ["write_outputs"],
        "empirical.bridge.ladder_dynamics.train_variants": ["run_ladder_dynamics"],
        "empirical.bridge.ladder_dynamics.trainer": ["Context", "train_run"],
        "empirical.bridge.ladder_dynamics.variants": ["ladder_variants"],
    },
)
