"""Command line: ``python -m theory {g1,report} [options]``.

Examples::

    python -m theory g1 --p 5 --K 3 --beta 4 --format json     # same shape as disentangled
    python -m theory g1 --p 11 --K 2 --beta 2 --format table --top 15
    python -m theory report --out theory_report.md

``g1`` prints the closed form of G1 (derived symbolically, evaluated in float64) as
``{"basis": [labels], "G1": [[...]]}`` (row = query component, column = key component), so it
can be diffed against ``python -m disentangled g1``.  Bad arguments print one ``error:`` line
and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from disentangled.command_line import OneLineParser, UsageError, check_output_file, run_main

PROG = "python -m theory"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("g1", help="closed-form G1 evaluated at (p, K, beta)")
    g.add_argument("--p", type=int, default=5, help="modulus, >= 2 (default 5)")
    g.add_argument("--K", type=int, default=3, help="number of variables, 1 <= 2K <= L-4")
    g.add_argument("--beta", type=float, default=4.0, help="scale of W0 (default 4)")
    g.add_argument("--L", type=int, default=16, help="sequence length (default 16)")
    g.add_argument(
        "--operand-order", choices=("fixed", "swapped", "mixed"), default="fixed",
        help="1-var operand order (default fixed: number at L-3, variable at L-2)",
    )  # fmt: skip
    g.add_argument(
        "--kind", choices=("0var", "1var", "2var"), default="1var",
        help="population the gradient is taken on (default 1var, the theorem's data)",
    )  # fmt: skip
    g.add_argument("--format", choices=("json", "table"), default="table")
    g.add_argument("--top", type=int, default=30, help="entries shown by --format table")

    r = sub.add_parser("report", help="write theory_report.md (derivation + numeric checks)")
    r.add_argument("--out", type=Path, default=Path("theory_report.md"))
    r.add_argument("--quick", action="store_true", help="one small config, coarse eta grid")
    return parser


def _check_g1_args(args) -> None:
    if not math.isfinite(args.beta):
        raise UsageError(f"--beta={args.beta}: must be finite")
    if args.p < 2:
        raise UsageError(f"--p={args.p}: must be >= 2")
    if args.L < 6:
        raise UsageError(f"--L={args.L}: must be >= 6")
    if args.K < 1 or 2 * args.K > args.L - 4:
        raise UsageError(f"--K={args.K}: must satisfy 1 <= K <= {(args.L - 4) // 2} (L={args.L})")
    if args.top < 1:
        raise UsageError(f"--top={args.top}: must be >= 1")


def run(args) -> int:
    if args.command == "g1":
        _check_g1_args(args)
        from theory.g1_closed_form import g1_matrix

        labels, G = g1_matrix(args.p, args.K, args.beta, args.L, args.kind, args.operand_order)
        if args.format == "json":
            print(json.dumps({"basis": labels, "G1": G.tolist()}))
        else:
            print(
                f"G1 closed form ({args.kind}, p={args.p}, K={args.K}, beta={args.beta:g}, "
                f"L={args.L}, operand order {args.operand_order})"
            )
            print(f"{'row (query)':>12} {'col (key)':>12} {'value':>24}")
            flat = sorted(
                ((abs(G[i, j]), i, j) for i in range(len(labels)) for j in range(len(labels))),
                key=lambda t: (-t[0], t[1], t[2]),
            )
            for _, i, j in flat[: args.top]:
                print(f"{labels[i]:>12} {labels[j]:>12} {G[i, j]:>24.17g}")
        return 0
    if args.command == "report":
        from theory.claims import Point
        from theory.report import write_report

        check_output_file(args.out, "--out")  # before the minutes of checks
        points = [Point(3, 2, 1.0)] if args.quick else None
        out = write_report(args.out, points, quick=args.quick)
        print(f"wrote {out}")
        return 0
    raise UsageError(f"unknown command {args.command!r}")


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except ValueError as e:  # invalid values reaching the derivation
        if isinstance(e, UsageError):
            raise
        raise UsageError(str(e)) from e


def main(argv: list[str] | None = None) -> int:
    """Bad arguments: one `error: ...` line and exit status 2 (disentangled.command_line)."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
