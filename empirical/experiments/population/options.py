"""What a population's claims can vary (`PopulationOptions`, which `summarize_population`
takes) and the command line of `python -m empirical claims` (`ClaimsOptions`: the same fields,
a grid config's and the command's own), declared once (empirical.config.options;
docs/populations.md). No torch here."""

from __future__ import annotations

from pathlib import Path

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, integer
from empirical.config.options import arg, options_class
from empirical.config.output_options import Figures, Format
from empirical.experiments.population.quantities import ROBUST_WINDOW
from empirical.experiments.sweep.options import GridConfigOptions
from empirical.runs.config import config_field
from empirical.runs.rundir import RunDir

DESCRIPTION = ("Train (or read) a population of runs of one config, seeds as members, and count "
               "how often each paper claim holds, with intervals, jump-step survival and robust "
               "final accuracies.")  # fmt: skip
Count = integer(1, wording=MUST)


@options_class("claims", DESCRIPTION)
class PopulationOptions(Format, Figures):
    """Everything `summarize_population` can vary; each field is also a flag of `claims`."""

    jobs: Count = arg(1, metavar="J", help="analyse the members in J processes")
    analysis: Flag = arg(
        True, help="run no analysis or compare-qk: count the checks from summary.json and the "
        "metrics, and from analysis.json / compare-qk output only where a member has them")
    final_window: Count = arg(
        ROBUST_WINDOW, metavar="STEPS", help="robust final accuracy: the mean over the "
        "evaluations of the last STEPS steps")
    paper_run: str | None = arg(
        None, metavar="DIR", raw=True, help="a run directory (the paper's run, imported: "
        "runs/authors) to place in every population: its value and rank per check, "
        "in claims.md")


@options_class("claims", DESCRIPTION, field_hint=config_field)
class ClaimsOptions(PopulationOptions, GridConfigOptions):
    """`python -m empirical claims --config G [...]`: each variant of the grid config is one
    population (docs/populations.md)."""

    out: str | None = arg(None, raw=True,
                          help="population directory (default runs/population/NAME)")  # fmt: skip

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("runs") / "population" / self.grid[0].name

    def check(self) -> None:
        """The grid config with the changes, the paper's run, the executor: before any
        training."""
        _ = self.grid  # loaded and checked once (cached)
        if self.paper_run is not None:
            RunDir(self.paper_run).require_run()
        self.check_batches()


@options_class("recount", "Bring published claims.json files to the present form from what they "
               "hold: spike claims split, ranks, leans; the paper's run re-placed.")  # fmt: skip
class RecountOptions(Format, Figures):
    """`python -m empirical recount CLAIMS_DIR ... [--paper-run RUN] [--comparison DIR]`: each
    directory's claims.json rewritten in place with its claims.md and figures (docs/
    populations.md, "Recounting a published population")."""

    claims_dirs: tuple[str, ...] = arg(
        help="directories holding a claims.json (docs/results/populations/NAME)",
        positional=True, nargs="+", metavar="CLAIMS_DIR", raw=True)  # fmt: skip
    paper_run: str | None = arg(
        None, metavar="RUN", raw=True, help="the paper's run, imported and evaluated "
        "(runs/authors): its jump steps are read from its summary.json")
    comparison: str | None = arg(
        None, metavar="DIR", raw=True, help="also write the populations' comparison there "
        "(two or more CLAIMS_DIR)")

    def check(self) -> None:
        """Every directory holds a claims.json; the paper's run is a run; a comparison needs
        two populations: before anything is written."""
        for d in self.claims_dirs:
            if not (Path(d) / "claims.json").is_file():
                raise UsageError(f"CLAIMS_DIR = {d!r}: no claims.json there")
        if self.paper_run is not None:
            RunDir(self.paper_run).require_run()
        if self.comparison is not None and len(self.claims_dirs) < 2:
            raise UsageError(f"--comparison = {self.comparison!r} needs two or more CLAIMS_DIR, "
                             f"got {len(self.claims_dirs)}")  # fmt: skip


@options_class("at-step", "Each run as the run of S steps it was (a constant learning rate): a "
               "population stopped before its last step counted at a common step.")  # fmt: skip
class AtStepOptions:
    """`python -m empirical at-step RUN ... --step S --out DIR`: each run's first S steps as the
    run of S steps, in DIR/<its name> (empirical.experiments.population.at_step)."""

    runs: tuple[str, ...] = arg(help="run directories (a population's members)", positional=True,
                                nargs="+", metavar="RUN", raw=True)  # fmt: skip
    step: integer(1, wording=MUST) = arg(help="the step to cut at: one every run fully evaluated")
    out: str = arg(help="where the cut runs go, one directory each", raw=True)

    def check(self) -> None:
        """Every run is a run, and none of the outputs exists, before anything is written."""
        for r in self.runs:
            RunDir(r).require_run()
            if (Path(self.out) / Path(r).name).exists():
                raise UsageError(f"--out {self.out}: {Path(r).name} exists there; give an "
                                 "empty --out")  # fmt: skip
