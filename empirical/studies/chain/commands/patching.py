"""`python -m empirical chain-patching RUN_DIR [--set chain/1var_h2]`: which layer carries
which hop of a chain run, by activation patching (docs/chain.md). Writes
RUN_DIR/analysis/chain_patching_SET.json and .png (SET with `/` as `_`; both corruptions) and
prints the tables.
"""

from __future__ import annotations

import json
import sys

from empirical.config.command_line import main_of, parser
from empirical.report.figures import use_cli_backend
from empirical.studies.chain.commands.attention import chain_run_arguments, open_chain_run


def run(argv: list[str]) -> int:
    ap = parser("chain-patching", "Activation patching: which layer carries which hop.")
    chain_run_arguments(ap)
    ap.add_argument("--seed", type=int, default=0, help="the number corruption's draws")
    args = ap.parse_args(argv)
    run_dir, sets, model, vocab = open_chain_run(args, "chain-patching")
    from empirical.report.files import atomic_write_bytes
    from empirical.studies.chain.analysis.patching import (
        CORRUPTIONS,
        chain_patching,
        plot_chain_patching,
    )

    tokens = sets[args.set].tokens[: args.n]
    results = [chain_patching(model, vocab, tokens, c, seed=args.seed) for c in CORRUPTIONS]
    out = run_dir.analysis_dir()
    out.mkdir(parents=True, exist_ok=True)
    stem = f"chain_patching_{args.set.replace('/', '_')}"
    where = f"step {args.step}" if args.step is not None else "latest weights"
    payload = {"set": args.set, "weights": where, "results": results}
    atomic_write_bytes(out / f"{stem}.json", json.dumps(payload, indent=2).encode())
    use_cli_backend()
    title = ("Which layer carries which hop: patching the clean residual stream into the "
             f"corrupted run ({run_dir.label()}, {args.set}, {where})")
    plot_chain_patching(results, out / f"{stem}.png", title)
    for res in results:
        print(f"corrupted: the {res['corruption']} ({res['n']} sequences); share of the logit "
              "difference restored by patching one position")  # fmt: skip
        roles = res["roles"]
        print(" " * 18 + " ".join(f"{r[:14]:>14s}" for r in roles))
        for point in res["points"]:
            cells = " ".join(
                "             -" if (v := res["restored"][point].get(r)) is None
                else f"{round(v, 3) + 0.0:14.3f}" for r in roles
            )  # fmt: skip
            print(f"{point:18s}{cells}")
    print(f"wrote {out / stem}.json and .png", file=sys.stderr)
    return 0


main = main_of(run)
