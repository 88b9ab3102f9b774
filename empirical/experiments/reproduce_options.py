"""The command line of `python -m empirical reproduce` (ReproduceOptions), declared once
(empirical.config.options): the run config (RunConfigOptions) and the main job's own flags.
No torch here."""

from __future__ import annotations

from pathlib import Path

from disentangled.command_line import check_output_dir
from disentangled.errors import UsageError
from empirical.config.field_types import Flag
from empirical.config.options import arg, options_class
from empirical.config.paths import authors_checkpoints
from empirical.runs.config import config_field
from empirical.runs.options import RunConfigOptions
from empirical.train.options import RUNS_ROOT


@options_class("reproduce", "theory tests + report, the paper's own run (imported), our "
               "training, analysis, QK comparison, report.md", field_hint=config_field)  # fmt: skip
class ReproduceOptions(RunConfigOptions):
    """`python -m empirical reproduce [--config FILE] [key=value ...]`."""

    runs_root: str = arg(RUNS_ROOT, help="writes RUNS_ROOT/NAME/report.md")
    skip_theory: Flag = arg(False, help="skip pytest theory and the report")
    authors: str | None = arg(
        None, help="the paper authors' checkpoints folder (checkpoint_step_N.pth files; default "
        "../shared/authors/checkpoints beside the repository when present; $AUTHORS_DIR or "
        "$ASSIGN_ADD_SHARED point elsewhere)")  # fmt: skip
    no_authors: Flag = arg(False, help="skip the paper's own run")
    progress: Flag = arg(True, help="no progress bars")

    def root(self) -> Path:
        """RUNS_ROOT/NAME: where the main job writes (report.md, the runs)."""
        return Path(self.runs_root) / self.run_config().name

    def authors_dir(self) -> Path | None:
        """The authors' checkpoints folder (None: --no-authors; the default is skipped with a
        note where it is absent)."""
        if self.no_authors:
            return None
        return Path(self.authors) if self.authors is not None else authors_checkpoints()

    def check(self) -> None:
        """The config, RUNS_ROOT/NAME (nothing created) and --authors, before any work."""
        check_output_dir(self.root(), flag="--runs-root")
        if not self.no_authors and self.authors is not None and not Path(self.authors).is_dir():
            raise UsageError(
                f"--authors {self.authors}: not a folder of checkpoint_step_N.pth files"
            )
