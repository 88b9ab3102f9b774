"""The options of the graph family's commands, each declared once (empirical.config.options)
and checked before torch is imported: `GraphLadderOptions` (graph-ladder: the seed's ablation
ladder over seeds) and `GraphMechanismOptions` (graph-mechanism: one recurrent run's heads and
MLP, per iteration)."""

from __future__ import annotations

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, integer
from empirical.config.field_types import split_list as _split
from empirical.config.options import arg, options_class
from empirical.runs.config import Seed, config_field
from empirical.runs.options import RunConfigOptions
from empirical.runs.rundir import RunDir

__all__ = ["LADDER", "GraphLadderOptions", "GraphMechanismOptions"]

# the seed's ablation ladder: name -> (what it is, its model.* settings over the config's)
LADDER: dict[str, tuple[str, dict]] = {
    "ff2": ("feedforward, 2 layers, end to end", {"recurrence": "none", "n_layers": 2}),
    "ff4": ("feedforward, 4 layers, end to end", {"recurrence": "none", "n_layers": 4}),
    "rec": ("recurrent (1), end to end", {"latent_supervision": False, "discrete_state": False}),
    "rec_sup": ("1+2: latent supervision", {"latent_supervision": True, "discrete_state": False}),
    "rec_sup_discrete": ("1+2+3: + discrete anchoring",
                         {"latent_supervision": True, "discrete_state": True}),
    "rec_sup_discrete_corrupt": ("1+2+3+4: + error correction",
                                 {"latent_supervision": True, "discrete_state": True,
                                  "corruption": None}),
}  # fmt: skip
# (corruption None: the config's model.corruption; the rungs below it have none)


def _variants(value):
    items = tuple(_split(value)) if value is not None else tuple(LADDER)
    unknown = [v for v in items if v not in LADDER]
    if unknown or not items:
        raise UsageError(
            f"--variants {','.join(map(str, items))}: allowed {', '.join(LADDER)} (comma-separated)"
        )
    return items


@options_class("graph-ladder", "The seed's ablation ladder on the graph family, over seeds.",
               field_hint=config_field)  # fmt: skip
class GraphLadderOptions(RunConfigOptions):
    """`python -m empirical graph-ladder --config configs/graph_ladder.toml [key=value ...]
    [--seeds 0 1 2] [--variants ff2,rec,...] [--out DIR] [--no-train]`: trains each variant
    (LADDER) for each seed under OUT/runs/VARIANT/seedS (a finished run is kept, an unfinished
    one resumed), scores every final model per node and per graph, by size and by depth, and
    writes OUT/ladder.json, ladder.md and the figures."""

    seeds: tuple[Seed, ...] = arg((0, 1, 2), help="the seeds of every variant", nargs="+")
    variants: str | None = arg(None, raw=True,
                               help="comma-separated rungs (default: all six)")  # fmt: skip
    out: str = arg("runs/graph_ladder", help="the ladder's directory")
    train: Flag = arg(True, help="report the runs already finished; train none")
    progress: Flag = arg(True, help="no progress bars")
    figures: Flag = arg(True, help="numbers only: no figures")

    def check(self) -> None:
        """The config is the graph family's, the variants are known, the seeds distinct."""
        _variants(self.variants)
        cfg = self.run_config()
        if cfg.task.family != "graph":
            raise UsageError(f"graph-ladder trains the graph family; the config has "
                             f"task.family = {cfg.task.family!r}")  # fmt: skip
        if len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"--seeds {' '.join(map(str, self.seeds))}: a seed is repeated")

    def variant_names(self) -> tuple[str, ...]:
        return _variants(self.variants)


@options_class("graph-mechanism", "A recurrent graph run's heads and MLP, iteration by iteration.")
class GraphMechanismOptions:
    """`python -m empirical graph-mechanism RUN_DIR [--n 200] [--out DIR]`: per iteration, the
    heads' groups by operand slot, their OV per factor of the discrete state, the MLP's
    frequency content over operand values (docs/graph.md)."""

    run_dir: str = arg(help="a run directory of the graph family with a recurrent model",
                       positional=True)  # fmt: skip
    n: integer(1, wording=MUST) = arg(200, help="graphs perturbed for the head groups")
    out: str | None = arg(None, help="output directory (default RUN_DIR/analysis)")
    figures: Flag = arg(True, help="numbers only: no figures")

    def check(self) -> None:
        run = RunDir(self.run_dir).require_family("graph", "graph-mechanism")
        if not run.read_config().model.recurrent:
            raise UsageError(f"{run}: model.recurrence = 'none'; graph-mechanism reads a "
                             "recurrent model's iterations")  # fmt: skip
