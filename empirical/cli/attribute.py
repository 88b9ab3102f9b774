"""`python -m empirical attribute RUN_DIR --window A:B [...]`: what drives a change of a run's
losses and labelled layer-2 scores between steps A and B, split into the model's parameter
groups by integrating each target's gradient along the training path. Writes, per window,
OUT/A_B/attribution.json, attribution.npz, shares.png and first_order.png, and OUT/summary.md
(default OUT: RUN_DIR/attribution), and prints summary.md. Its options:
empirical.bridge.attribution.options. See docs/attribution.md.
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from disentangled.command_line import prepare_output_dir
from empirical.bridge.attribution.options import AttributeOptions
from empirical.bridge.attribution.outputs import summary_report, window_name, window_report
from empirical.bridge.attribution.path_comparison import compare_paths, comparison_report
from empirical.bridge.attribution.run_attribution import attribute_window
from empirical.config.options import command_main
from empirical.report.writer import print_report, write_report
from empirical.runs.rundir import RunDir


def run(opts: AttributeOptions) -> int:
    run_dir = RunDir(opts.run_dir).path
    out = prepare_output_dir(opts.out or run_dir / "attribution")
    if opts.threads:  # the gradients' threads (the replay's numbers do not depend on them)
        torch.set_num_threads(opts.threads)
    lib = dataclasses.replace(opts, progress=not opts.quiet)
    results, paths = [], {}
    kinds = ("straight", "replay") if opts.path == "both" else (opts.path,)
    for a, b in opts.windows:
        mine = []
        for kind in kinds:
            result = attribute_window(run_dir, a, b, dataclasses.replace(lib, path=kind))
            name = window_name(result) + (f"/{kind}" if len(kinds) > 1 else "")
            written = write_report(window_report(result), out / name, opts.figures, opts.format)
            paths.update({f"{name}/{file}": path for file, path in written.items()})
            mine.append(result)
        if len(mine) == 2 and not opts.first_order_only:
            name = window_name(mine[0])
            written = write_report(comparison_report(compare_paths(*mine)), out / name)
            paths.update({f"{name}/{file}": path for file, path in written.items()})
        results += mine
    summary = summary_report(results)
    paths.update(write_report(summary, out))
    print_report(summary, paths, opts.quiet)
    return 0


main = command_main(AttributeOptions, run)

if __name__ == "__main__":
    sys.exit(main())
