"""`python -m empirical reproduce [--config FILE] [key=value ...]`: the whole paper, one command.
Its options: empirical.experiments.reproduce_options.ReproduceOptions."""

from __future__ import annotations

import sys
from pathlib import Path

from disentangled.command_line import prepare_output_dir
from empirical.config.options import command_main
from empirical.experiments.reproduce import reproduce
from empirical.experiments.reproduce_options import ReproduceOptions


def run(opts: ReproduceOptions) -> int:
    prepare_output_dir(opts.root(), flag="--runs-root")
    path = reproduce(opts.run_config(), Path(opts.runs_root), opts.skip_theory, opts.progress,
                     opts.authors_dir())  # fmt: skip
    print(path.read_text())
    return 0


main = command_main(ReproduceOptions, run)

if __name__ == "__main__":
    sys.exit(main())
