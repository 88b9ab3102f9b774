"""The options of `python -m empirical analyze` (`AnalyzeOptions`): what one run's analysis
varies (empirical.analysis.options.AnalysisOptions) and the command's own, checked before
torch is imported. They sit here, above the analyses, because the run's task family says
which analysis runs (empirical.studies.registry.ANALYSES; none: the paper's)."""

from __future__ import annotations

from empirical.analysis.options import AnalysisOptions
from empirical.config.field_types import Flag
from empirical.config.options import arg, options_class
from empirical.runs.rundir import RunDir
from empirical.studies.registry import ANALYSES

__all__ = ["AnalyzeOptions"]


@options_class("analyze", "Mechanistic analysis of a training run (paper Sections 5-6, App. B).")
class AnalyzeOptions(AnalysisOptions):
    """`python -m empirical analyze RUN_DIR [...]`: an analysis's options and the command's.
    A chain or lego run reads --step, --out, --no-dynamics, --no-figures, --format and
    --quiet (the family's own analysis)."""

    run_dir: str = arg(help="a run directory written by `python -m empirical train`",
                       positional=True)  # fmt: skip
    quiet: Flag = arg(False, help="do not print the summary")
    no_progress: Flag = arg(False, help="no progress bar")

    def check(self) -> None:
        """The run and the step exist, and a run the paper's analysis reads has two layers,
        before the output directory is made."""
        run = RunDir(self.run_dir).require_run()
        run.model_path(self.step)  # the step exists (an error listing the steps otherwise)
        if run.read_config().task.family not in ANALYSES:
            run.read_two_layer_config("analyze")

