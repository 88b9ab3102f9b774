"""The chain model's subcommands of ``python -m disentangled`` (chain-g1, chain-step,
chain-dynamics); wired in by ``__main__``.  Same conventions as the C.1 subcommands:
``--format json|table``, one ``error:`` line and exit 2 for bad values.

    python -m disentangled chain-g1 --p 5 --K 3 --pointers 1 --format json
    python -m disentangled chain-step --hop1-share 0.5 --out runs/chain
    python -m disentangled chain-dynamics --train both --steps 100 --out runs/chain
"""

from __future__ import annotations

import argparse
import json
import math

from .command_line import UsageError, parse_mix, write_output
from .config import OPERAND_ORDERS, ConfigError

CHAIN_COMMANDS = ("chain-g1", "chain-step", "chain-dynamics")
CHAIN_FLAG = {
    "p": "--p", "K": "--K", "pointers": "--pointers", "beta": "--beta", "L": "--L",
    "operand_order": "--operand-order", "mix_0var": "--mix", "mix_1var": "--mix",
    "mix_2var": "--mix", "hop1_share": "--hop1-share",
}  # fmt: skip


def _add_chain_config(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (two-hop chain, ../shared/spec/chain.md)")
    g.add_argument("--p", type=int, default=5, help="modulus, >= 3 (default 5)")
    g.add_argument("--K", type=int, default=3, help="number of variables, 2 <= 2K <= L-4")
    g.add_argument("--pointers", type=int, default=1, help="pointer variables, 0..K-1 (default 1)")
    g.add_argument("--beta", type=float, default=4.0, help="scale of W0 (default 4)")
    g.add_argument("--L", type=int, default=16, help="sequence length (default 16)")
    g.add_argument("--operand-order", choices=OPERAND_ORDERS, default="fixed")
    g.add_argument("--mix", default="1var=1", help="0/1/2-variable mix, e.g. '1var=1,2var=1'")
    g.add_argument("--hop1-share", type=float, default=0.5, help="1-hop share in [0, 1]")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")


def add_chain_parsers(sub) -> None:
    p = sub.add_parser("chain-g1", help="chain model: first-order gradients of W2 and W3 at W0")
    _add_chain_config(p)
    p.add_argument("--format", choices=("json", "table"), default="table")
    p.add_argument("--top", type=int, default=30, help="entries shown by --format table")

    p = sub.add_parser("chain-step", help="chain model: one W3 step, then one W2 step")
    _add_chain_config(p)
    p.add_argument("--scales3", type=float, nargs="+", help="eta3*max|G3| grid (default 13)")
    p.add_argument("--scales2", type=float, nargs="+", help="eta2*max|G2| grid (default 13)")
    p.add_argument("--out", help="write chain_step.md and chain_step.json here")

    p = sub.add_parser("chain-dynamics", help="chain model: gradient descent on W2/W3")
    _add_chain_config(p)
    p.add_argument("--train", choices=("both", "w2", "w3"), default="both")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--xi", type=float, default=10.0, help="output scale xi (default 10)")
    p.add_argument("--out", required=True, help="writes chain_dynamics.json/.png")


def _chain_config(args):
    from .chain_config import ChainConfig

    mix = parse_mix(args.mix)
    return ChainConfig(
        p=args.p, K=args.K, pointers=args.pointers, beta=args.beta, L=args.L,
        operand_order=args.operand_order, mix_0var=mix.get("0var", 0.0),
        mix_1var=mix.get("1var", 0.0), mix_2var=mix.get("2var", 0.0),
        hop1_share=args.hop1_share,
    )  # fmt: skip


def _positive(name: str, value, zero_ok: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if zero_ok else value > 0)
    if not ok:
        raise UsageError(f"{name}={value}: must be {'>= 0' if zero_ok else '> 0'} and finite")


def run_chain(args) -> int:
    """Run one chain subcommand; a bad config value is a UsageError naming its flag."""
    try:
        cfg = _chain_config(args)
    except ConfigError as e:
        raise UsageError(f"{CHAIN_FLAG.get(e.field, e.field)}={e.value}: {e.message}") from e
    from pathlib import Path

    from .chain_experiments import available_kinds
    from .chain_population import MAX_SEQUENCES, population_size

    biggest = max(population_size(cfg, k) for k in available_kinds(cfg))
    if biggest > MAX_SEQUENCES:
        raise UsageError(
            f"--p={cfg.p} --K={cfg.K} --pointers={cfg.pointers}: a population of {biggest} "
            f"sequences (at most {MAX_SEQUENCES} are enumerated); lower p or K"
        )
    from .basis import Basis

    out = Path(args.out) if getattr(args, "out", None) else None
    if args.command == "chain-g1":
        _positive("--top", args.top)
        from .chain_gradient import chain_g1

        G2, G3 = chain_g1(cfg)
        basis = Basis(cfg.p, cfg.K, cfg.L)
        if args.format == "json":
            mix = cfg.training_mix()
            print(
                json.dumps(
                    {"basis": basis.labels, "mix": mix, "G1_W2": G2.tolist(), "G1_W3": G3.tolist()}
                )
            )
        else:
            print(
                f"G1^(3) = leading term of -grad_W3 L at (W0, W0), mix {cfg.training_mix()}, {cfg}"
            )
            print(f"max|G1^(2)| (W2) = {float(G2.abs().max()):.17g}")
            print(f"{'row (query)':>12} {'col (key)':>12} {'value':>24}")
            for r, c, v in basis.largest_entries(G3, args.top):
                print(f"{r:>12} {c:>12} {v:>24.17g}")
        return 0

    if args.command == "chain-step":
        from .chain_experiments import one_step_each, one_step_markdown

        for s in (args.scales3 or []) + (args.scales2 or []):
            _positive("--scales3/--scales2", s)
        res = one_step_each(cfg, args.scales3, args.scales2)
        md = one_step_markdown(res)
        print(md)
        write_output(out, "chain_step.md", md + "\n")
        write_output(out, "chain_step.json", json.dumps(res, indent=1))
        return 0

    # chain-dynamics
    _positive("--steps", args.steps, zero_ok=True)
    _positive("--lr", args.lr)
    _positive("--xi", args.xi)
    from .chain_experiments import chain_dynamics, plot_chain_dynamics

    result = chain_dynamics(cfg, args.steps, args.lr, args.xi, args.train)
    last = result["history"][-1]
    print(
        f"step {last['step']}: loss {last['loss']:.6f}, accuracy "
        + ", ".join(f"{k} {v:.4f}" for k, v in last["accuracy"].items())
    )
    write_output(out, "chain_dynamics.json", json.dumps(result, indent=1))
    print(f"wrote {plot_chain_dynamics(result, out / 'chain_dynamics.png')}")
    return 0
