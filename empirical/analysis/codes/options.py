"""The command line of `python -m empirical codes RUN [RUN ...]` (`CodesOptions`), declared once
(empirical.config.options; docs/heads.md, "Latent codes"). No torch here."""

from __future__ import annotations

from pathlib import Path

from disentangled.errors import UsageError
from empirical.config.field_types import MUST, Flag, integer
from empirical.config.options import arg, options_class
from empirical.config.output_options import Output, Threads


@options_class("codes", "Multi-head attention's latent codes at `=`: a probe for the "
               "sequence's form on held-out compositions, their structure, when they appear.")
class CodesOptions(Output, Threads):
    """The runs, the sizes, the snapshots and where the files go."""

    runs: tuple[str, ...] = arg(help="run directories (several: a summary by variant too)",
                                positional=True, nargs="+", raw=True)  # fmt: skip
    out: str | None = arg(None, help="the summary's directory (default RUN/codes for one run; "
                          "each run's own files always go to RUN/codes)", raw=True)  # fmt: skip
    step: integer(0, wording=MUST) | None = arg(
        None, help="read snapshots/step_S.pt (default: the final model)", metavar="S")
    n_train: integer(64, wording=MUST) = arg(3000, help="training sequences for the probe",
                                              flag="--train-size", metavar="N")  # fmt: skip
    n_test: integer(16, wording=MUST) = arg(1000, help="sequences per evaluation set (at most)",
                                             flag="--test-size", metavar="N")  # fmt: skip
    timeline: Flag = arg(True, help="skip the probe over the snapshots",
                         flag="--no-timeline")  # fmt: skip
    every: integer(1, wording=MUST) = arg(1, help="over training: every N-th snapshot",
                                          metavar="N")  # fmt: skip
    seed: integer(0, wording=MUST) = arg(0, help="the probes' data and permutation seed")
    figures: Flag = arg(True, help="numbers only: no figures", flag="--no-figures")

    def check(self) -> None:
        for run in self.runs:
            if not (Path(run) / "config.toml").is_file():
                raise UsageError(f"{run}: not a run directory (no config.toml)")
        if len(self.runs) > 1 and self.out is None:
            raise UsageError("several runs need --out DIR (where their summary goes)")
