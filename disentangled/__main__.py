"""Command line of the disentangled model: ``python -m disentangled COMMAND [options]``.

C.1's model (one hop): ``g1``, ``step``, ``dynamics``, ``random-embedding``; the two-hop chain
model (../shared/spec/chain.md): ``chain-g1``, ``chain-step``, ``chain-dynamics``, the same
commands with a middle layer, pointers and a training mix.

Examples::

    python -m disentangled g1 --p 5 --K 3 --beta 4 --format json
    python -m disentangled step --out runs/disentangled
    python -m disentangled dynamics --steps 300 --lr 0.2 --xi 10 --out runs/disentangled
    python -m disentangled random-embedding --dims 64 1024 16384 --out runs/disentangled
    python -m disentangled chain-g1 --p 5 --K 3 --pointers 1 --format json
    python -m disentangled chain-step --hop1-share 0.5 --out runs/chain
    python -m disentangled chain-dynamics --train both --steps 100 --out runs/chain

Bad arguments print one ``error: ...`` line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from . import experiments
from .basis import Basis
from .command_line import (
    OneLineParser,
    UsageError,
    check_output_dir,
    parse_mix,
    run_main,
    use_cli_backend,
    write_output,
)
from .config import OPERAND_ORDERS, ChainConfig, ConfigError, SimConfig
from .gradient import first_order_gradients, g1
from .population import MAX_SEQUENCES, available_kinds, population_size

FLAG = {
    "p": "--p", "K": "--K", "pointers": "--pointers", "beta": "--beta", "L": "--L",
    "operand_order": "--operand-order", "mix_0var": "--mix", "mix_1var": "--mix",
    "mix_2var": "--mix", "hop1_share": "--hop1-share",
}  # fmt: skip
CHAIN = "chain-"  # the prefix of the two-hop commands
MODEL = {1: "model (Theorem C.1)", 2: "model (two-hop chain, ../shared/spec/chain.md)"}
_OUT = {1: Path, 2: str}  # --out "" is no output for the chain commands


def _add_config(p: argparse.ArgumentParser, hops: int) -> None:
    g = p.add_argument_group(MODEL[hops])
    g.add_argument("--p", type=int, default=5, help="modulus, >= 3 (default 5)")
    g.add_argument("--K", type=int, default=3, help="number of variables, 2 <= 2K <= L-4")
    if hops == 2:
        g.add_argument(
            "--pointers", type=int, default=1, help="pointer variables, 0..K-1 (default 1)"
        )
    g.add_argument("--beta", type=float, default=4.0, help="scale of W0 (default 4)")
    g.add_argument("--L", type=int, default=16, help="sequence length (default 16)")
    g.add_argument(
        "--operand-order", choices=OPERAND_ORDERS, default="fixed", help="1-var operand order"
    )
    if hops == 2:
        g.add_argument("--mix", default="1var=1", help="0/1/2-variable mix, e.g. '1var=1,2var=1'")
        g.add_argument("--hop1-share", type=float, default=0.5, help="1-hop share in [0, 1]")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")


def _add_g1(sub, hops: int, help: str) -> None:
    p = sub.add_parser("g1" if hops == 1 else CHAIN + "g1", help=help)
    _add_config(p, hops)
    p.add_argument("--format", choices=("json", "table"), default="table")
    p.add_argument("--top", type=int, default=30, help="entries shown by --format table")


def _add_dynamics(sub, hops: int, help: str) -> None:
    p = sub.add_parser("dynamics" if hops == 1 else CHAIN + "dynamics", help=help)
    _add_config(p, hops)
    if hops == 2:
        p.add_argument("--train", choices=experiments.TRAINABLE, default="both")
    p.add_argument("--steps", type=int, default=300 if hops == 1 else 200)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--xi", type=float, default=10.0, help="output scale xi (default 10)")
    if hops == 1:
        p.add_argument(
            "--mix", default="1var=1", help="training mixture, e.g. '0var=1,1var=1,2var=1'"
        )
    out = "dynamics" if hops == 1 else "chain_dynamics"
    p.add_argument("--out", type=_OUT[hops], required=True, help=f"writes {out}.json/.png")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m disentangled", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_g1(sub, 1, "leading term G1 of -grad L(W0) on 1-var data")

    p = sub.add_parser("step", help="one step W0 + eta G1: accuracy before/after")
    _add_config(p, 1)
    p.add_argument("--etas", type=float, nargs="+", help="step sizes (default: log grid)")
    p.add_argument("--no-refine", action="store_true", help="do not bisect the eta edges")
    p.add_argument("--out", type=Path, help="write one_step.md and one_step.json here")

    _add_dynamics(sub, 1, "gradient descent on W over exact populations")

    p = sub.add_parser("random-embedding", help="one step with Gaussian embeddings in R^d")
    _add_config(p, 1)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 256, 1024, 4096, 16384, 65536])
    p.add_argument("--seeds", type=int, default=3, help="embedding draws per d")
    p.add_argument("--eta", type=float, help="step size (default: 2x the orthogonal threshold)")
    p.add_argument("--no-recompute", action="store_true", help="skip G1 recomputed in R^d")
    p.add_argument("--out", type=Path, help="writes random_embedding.md/.json/.png here")

    _add_g1(sub, 2, "chain model: first-order gradients of W2 and W3 at W0")
    p = sub.add_parser(CHAIN + "step", help="chain model: one W3 step, then one W2 step")
    _add_config(p, 2)
    p.add_argument("--scales3", type=float, nargs="+", help="eta3*max|G3| grid (default 13)")
    p.add_argument("--scales2", type=float, nargs="+", help="eta2*max|G2| grid (default 13)")
    p.add_argument("--out", type=_OUT[2], help="write chain_step.md and chain_step.json here")
    _add_dynamics(sub, 2, "chain model: gradient descent on W2/W3")
    return parser


def _config(args) -> SimConfig | ChainConfig:
    """The command's config (two hops for the chain-* commands); a bad value is a ConfigError."""
    common = dict(p=args.p, K=args.K, beta=args.beta, L=args.L, operand_order=args.operand_order)
    if not args.command.startswith(CHAIN):
        return SimConfig(**common)
    mix = parse_mix(args.mix)
    cfg = ChainConfig(
        **common, pointers=args.pointers, mix_0var=mix.get("0var", 0.0),
        mix_1var=mix.get("1var", 0.0), mix_2var=mix.get("2var", 0.0), hop1_share=args.hop1_share,
    )  # fmt: skip
    biggest = max(population_size(cfg, k) for k in available_kinds(cfg))
    if biggest > MAX_SEQUENCES:
        raise UsageError(
            f"--p={cfg.p} --K={cfg.K} --pointers={cfg.pointers}: a population of {biggest} "
            f"sequences (at most {MAX_SEQUENCES} are enumerated); lower p or K"
        )
    return cfg


def _positive(name: str, value: float | None, zero_ok=False) -> None:
    if value is None:
        return
    ok = math.isfinite(value) and (value >= 0 if zero_ok else value > 0)
    if not ok:
        raise UsageError(f"{name}={value}: must be {'>= 0' if zero_ok else '> 0'} and finite")


def _table(basis: Basis, G: torch.Tensor, top: int) -> None:
    print(f"{'row (query)':>12} {'col (key)':>12} {'value':>24}")
    for r, c, v in basis.largest_entries(G, top):
        print(f"{r:>12} {c:>12} {v:>24.17g}")


def _g1(cfg, args) -> None:
    _positive("--top", args.top)
    basis = Basis.from_config(cfg)
    if cfg.hops == 1:
        G = g1(cfg)
        out = {"basis": basis.labels, "G1": G.tolist()}
        title = f"G1 = leading term of -grad L(W0) (1-var), {cfg}"
    else:
        G2, G = first_order_gradients(cfg)
        mix = cfg.training_mix()
        out = {"basis": basis.labels, "mix": mix, "G1_W2": G2.tolist(), "G1_W3": G.tolist()}
        title = f"G1^(3) = leading term of -grad_W3 L at (W0, W0), mix {mix}, {cfg}"
        title += f"\nmax|G1^(2)| (W2) = {float(G2.abs().max()):.17g}"
    if args.format == "json":
        print(json.dumps(out))
        return
    print(title)
    _table(basis, G, args.top)


def _step(cfg, args, out: Path | None) -> None:
    if cfg.hops == 1:
        for e in args.etas or []:
            _positive("--etas", e)
        res = experiments.one_step(cfg, args.etas, refine=not args.no_refine)
        md, data, name = res.to_markdown(), res.to_json(), "one_step"
    else:
        for s in (args.scales3 or []) + (args.scales2 or []):
            _positive("--scales3/--scales2", s)
        data = experiments.one_step_each(cfg, args.scales3, args.scales2)
        md, name = experiments.one_step_each_markdown(data), "chain_step"
    print(md)
    write_output(out, f"{name}.md", md + "\n")
    write_output(out, f"{name}.json", json.dumps(data, indent=1))


def _dynamics(cfg, args, out: Path) -> None:
    _positive("--steps", args.steps, zero_ok=True)
    _positive("--lr", args.lr)
    _positive("--xi", args.xi)
    # matplotlib is imported when a figure is drawn: bad arguments are answered without it
    from .plotting import plot_dynamics, plot_two_hop_dynamics

    if cfg.hops == 1:
        mix = parse_mix(args.mix)
        result = experiments.dynamics(cfg, args.steps, args.lr, args.xi, mix)
        name, plot = "dynamics", plot_dynamics
    else:
        result = experiments.dynamics(cfg, args.steps, args.lr, args.xi, train=args.train)
        name, plot = "chain_dynamics", plot_two_hop_dynamics
    last = result["history"][-1]
    print(
        f"step {last['step']}: loss {last['loss']:.6f}, accuracy "
        + ", ".join(f"{k} {v:.4f}" for k, v in last["accuracy"].items())
    )
    write_output(out, f"{name}.json", json.dumps(result, indent=1))
    print(f"wrote {plot(result, out / f'{name}.png')}")


def _random_embedding(cfg, args, out: Path | None) -> None:
    for d in args.dims:
        _positive("--dims", d)
    _positive("--seeds", args.seeds)
    _positive("--eta", args.eta)
    from .plotting import plot_random_embedding  # matplotlib: as in _dynamics

    result = experiments.random_embedding(
        cfg, args.dims, args.eta, args.seeds, recompute=not args.no_recompute
    )
    md = experiments.random_embedding_table(result)
    print(md)
    if out is not None:
        write_output(out, "random_embedding.md", md + "\n")
        write_output(out, "random_embedding.json", json.dumps(result, indent=1))
        print(f"wrote {plot_random_embedding(result, out / 'random_embedding.png')}")


def run(args) -> int:
    cfg = _config(args)
    out = Path(args.out) if getattr(args, "out", None) else None
    if args.command.removeprefix(CHAIN) == "g1":
        _g1(cfg, args)
    elif args.command.removeprefix(CHAIN) == "step":
        _step(cfg, args, out)
    elif args.command.removeprefix(CHAIN) == "dynamics":
        _dynamics(cfg, args, out)
    else:
        _random_embedding(cfg, args, out)
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
