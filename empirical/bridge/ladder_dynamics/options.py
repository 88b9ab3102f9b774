"""The command line of `python -m empirical ladder-dynamics [OVERRIDES...] [--config FILE]
[--out DIR]` (`LadderDynamicsOptions`), declared once (empirical.config.options; docs/ladder.md).
What the ladder varies is its config, `DynamicsConfig` (a file and dotted overrides of it).
No torch here."""

from __future__ import annotations

from disentangled.command_line import check_output_dir
from empirical.bridge.ladder_dynamics.config import DynamicsConfig, dynamics_field
from empirical.config.io import load_config
from empirical.config.options import arg, options_class
from empirical.config.output_options import Output


@options_class("ladder-dynamics",
               "Train Theorem C.1's model with its constraints released one at a time.",
               field_hint=dynamics_field)  # fmt: skip
class LadderDynamicsOptions(Output):
    """The config (a file, then dotted overrides) and where the files go (--quiet, --format:
    empirical.config.output_options)."""

    overrides: tuple[str, ...] = arg(
        (), help="config overrides, dotted key=value (steps=100 sgd.lr=0.02)", positional=True,
        nargs="*", raw=True)  # fmt: skip
    config: str | None = arg(
        None, help="a ladder-dynamics config (TOML or JSON; default: the built-in defaults, "
        "equal to configs/ladder_dynamics.toml)")
    out: str = arg("runs/ladder_dynamics", help="output directory")

    def dynamics_config(self) -> DynamicsConfig:
        """The defaults, then --config, then the overrides (a ConfigError names the field)."""
        return load_config(DynamicsConfig, self.config, list(self.overrides))

    def check(self) -> None:
        """The config loads and the output directory can be made."""
        self.dynamics_config()
        check_output_dir(self.out)
