"""Command line: ``python -m disentangled {g1,step,dynamics,random-embedding,chain-g1,chain-step,
chain-dynamics} [options]`` (the chain-* subcommands: the two-hop model, ``chain_cli.py``).

Examples::

    python -m disentangled g1 --p 5 --K 3 --beta 4 --format json
    python -m disentangled step --out runs/disentangled
    python -m disentangled dynamics --steps 300 --lr 0.2 --xi 10 --out runs/disentangled
    python -m disentangled random-embedding --dims 64 1024 16384 --out runs/disentangled

Bad arguments print one ``error: ...`` line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from .basis import Basis
from .chain_cli import CHAIN_COMMANDS, add_chain_parsers, run_chain
from .command_line import (
    OneLineParser,
    UsageError,
    check_output_dir,
    parse_mix,
    run_main,
    use_cli_backend,
    write_output,
)
from .config import OPERAND_ORDERS, ConfigError, SimConfig

FLAG = {"p": "--p", "K": "--K", "beta": "--beta", "L": "--L", "operand_order": "--operand-order"}


def _add_config(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (Theorem C.1)")
    g.add_argument("--p", type=int, default=5, help="modulus, >= 3 (default 5)")
    g.add_argument("--K", type=int, default=3, help="number of variables, 2 <= 2K <= L-4")
    g.add_argument("--beta", type=float, default=4.0, help="scale of W0 (default 4)")
    g.add_argument("--L", type=int, default=16, help="sequence length (default 16)")
    g.add_argument(
        "--operand-order", choices=OPERAND_ORDERS, default="fixed", help="1-var operand order"
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m disentangled", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("g1", help="leading term G1 of -grad L(W0) on 1-var data")
    _add_config(p)
    p.add_argument("--format", choices=("json", "table"), default="table")
    p.add_argument("--top", type=int, default=30, help="entries shown by --format table")

    p = sub.add_parser("step", help="one step W0 + eta G1: accuracy before/after")
    _add_config(p)
    p.add_argument("--etas", type=float, nargs="+", help="step sizes (default: log grid)")
    p.add_argument("--no-refine", action="store_true", help="do not bisect the eta edges")
    p.add_argument("--out", type=Path, help="write one_step.md and one_step.json here")

    p = sub.add_parser("dynamics", help="gradient descent on W over exact populations")
    _add_config(p)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--xi", type=float, default=10.0, help="output scale xi (default 10)")
    p.add_argument("--mix", default="1var=1", help="training mixture, e.g. '0var=1,1var=1,2var=1'")
    p.add_argument("--out", type=Path, required=True, help="writes dynamics.json/.png")

    p = sub.add_parser("random-embedding", help="one step with Gaussian embeddings in R^d")
    _add_config(p)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 256, 1024, 4096, 16384, 65536])
    p.add_argument("--seeds", type=int, default=3, help="embedding draws per d")
    p.add_argument("--eta", type=float, help="step size (default: 2x the orthogonal threshold)")
    p.add_argument("--no-recompute", action="store_true", help="skip G1 recomputed in R^d")
    p.add_argument("--out", type=Path, help="writes random_embedding.md/.json/.png here")
    add_chain_parsers(sub)  # chain-g1, chain-step, chain-dynamics (chain_cli.py)
    return parser


def _config(args) -> SimConfig:
    return SimConfig(p=args.p, K=args.K, beta=args.beta, L=args.L, operand_order=args.operand_order)


def _positive(name: str, value: float | None, integer: bool = False, zero_ok=False) -> None:
    if value is None:
        return
    ok = math.isfinite(value) and (value >= 0 if zero_ok else value > 0)
    if not ok:
        raise UsageError(f"{name}={value}: must be {'>= 0' if zero_ok else '> 0'} and finite")


def run(args) -> int:
    from . import experiments
    from .gradient import g1

    if args.command in CHAIN_COMMANDS:
        return run_chain(args)
    cfg = _config(args)
    if args.command == "g1":
        _positive("--top", args.top)
        G = g1(cfg)
        basis = Basis.from_config(cfg)
        if args.format == "json":
            print(json.dumps({"basis": basis.labels, "G1": G.tolist()}))
        else:
            print(f"G1 = leading term of -grad L(W0) (1-var), {cfg}")
            print(f"{'row (query)':>12} {'col (key)':>12} {'value':>24}")
            for r, c, v in basis.largest_entries(G, args.top):
                print(f"{r:>12} {c:>12} {v:>24.17g}")
        return 0

    if args.command == "step":
        for e in args.etas or []:
            _positive("--etas", e)
        res = experiments.one_step(cfg, args.etas, refine=not args.no_refine)
        md = res.to_markdown()
        print(md)
        write_output(args.out, "one_step.md", md + "\n")
        write_output(args.out, "one_step.json", json.dumps(res.to_json(), indent=1))
        return 0

    if args.command == "dynamics":
        _positive("--steps", args.steps, zero_ok=True)
        _positive("--lr", args.lr)
        _positive("--xi", args.xi)
        from .plotting import plot_dynamics

        result = experiments.dynamics(cfg, args.steps, args.lr, args.xi, parse_mix(args.mix))
        last = result["history"][-1]
        print(
            f"step {last['step']}: loss {last['loss']:.6f}, accuracy "
            + ", ".join(f"{k} {v:.4f}" for k, v in last["accuracy"].items())
        )
        write_output(args.out, "dynamics.json", json.dumps(result, indent=1))
        print(f"wrote {plot_dynamics(result, args.out / 'dynamics.png')}")
        return 0

    # random-embedding
    for d in args.dims:
        _positive("--dims", d)
    _positive("--seeds", args.seeds)
    _positive("--eta", args.eta)
    from .plotting import plot_random_embedding

    result = experiments.random_embedding(
        cfg, args.dims, args.eta, args.seeds, recompute=not args.no_recompute
    )
    md = experiments.random_embedding_table(result)
    print(md)
    if args.out is not None:
        write_output(args.out, "random_embedding.md", md + "\n")
        write_output(args.out, "random_embedding.json", json.dumps(result, indent=1))
        print(f"wrote {plot_random_embedding(result, args.out / 'random_embedding.png')}")
    return 0


def _main(argv: list[str]) -> int:
    use_cli_backend()  # Agg: figures go to files (importing the package selects nothing)
    args = build_parser().parse_args(argv)
    if args.threads < 1:
        raise UsageError(f"--threads={args.threads}: must be >= 1")
    if getattr(args, "out", None) is not None:
        check_output_dir(args.out, "--out")  # before any computation
    torch.set_num_threads(args.threads)
    try:
        return run(args)
    except ConfigError as e:
        raise UsageError(f"{FLAG.get(e.field, e.field)}={e.value}: {e.message}") from e


def main(argv: list[str] | None = None) -> int:
    """Bad arguments: one `error: ...` line and exit status 2 (disentangled.command_line)."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
