"""`python -m empirical sample`: print sequences of the task, one per line with its label,
e.g. `c=1,b=17,a=42,b+19=? 36` (each task family prints its own text; --tokens: the L tokens
then the label); --held-out prints the seed's held-out pairs `x y`. Only the `task` table and
`seed` of a config file are read; overrides are `task.FIELD=VALUE` or `seed=VALUE`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from empirical.cli.parsing import parser
from empirical.config.command_line import UsageError, main_of
from empirical.config.field_types import MUST, integer
from empirical.config.io import (
    ConfigError,
    apply_overrides,
    config_class,
    from_dict,
    read_config_file,
    to_dict,
)
from empirical.runs.config import config_field
from empirical.task.config import TaskConfig, task_config
from empirical.task.registry import all_families, family_of

# the sampler and the evaluation sets import torch: imported once the arguments and the
# config are checked (render), so that a bad one is answered at once


@config_class()
class SampleConfig:
    """The part of a run config this command reads."""

    seed: integer(0, wording=MUST) = 0
    task: TaskConfig = dataclasses.field(default_factory=task_config)


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    ap = parser("sample", "Print sequences of the training distribution or of an evaluation "
                "set, one per line with its label.")  # fmt: skip
    ap.add_argument("--split", default="train", help=_split_help(argv))
    ap.add_argument("--n", type=int, default=10,
                    help="sequences to print (default 10; at most the set)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=None, help="run seed (default: config's, else 0)")
    ap.add_argument("--held-out", action="store_true", help="print the held-out pairs `x y`")
    ap.add_argument("--tokens", action="store_true", help="print the padded token form")
    ap.add_argument("--config", default=None, help="TOML/JSON run config (its task table, seed)")
    ap.add_argument("--device", default="cpu", help="device for training batches (default cpu)")
    ap.add_argument("overrides", nargs="*", help="task.FIELD=VALUE or seed=VALUE")
    ap.field_hint = _sample_field  # `--p 7`: hint task.p=7, never a field sample refuses
    return ap


def _split_help(argv: list[str] | None) -> str:
    """--split's help; it lists the set names (empirical.task.eval_sets: torch) only when the
    help is asked for."""
    text = "'train' (fresh on-the-fly batch) or an evaluation set"
    if argv is not None and not any(a in ("-h", "--help") for a in argv):
        return f"{text} (--help lists them)"
    return f"{text}: " + "; ".join(h for f in all_families() if (h := f.split_help()))


def _sample_field(name: str) -> str | None:
    field = config_field(name)
    return field if field == "seed" or (field or "").startswith("task.") else None


def load_sample_config(path: str | None, overrides: list[str]) -> SampleConfig:
    data = to_dict(SampleConfig())
    if path is not None:
        file_data = read_config_file(path)
        if "task" in file_data:
            if not isinstance(file_data["task"], dict):
                raise ConfigError(f"config file {path}: `task` must be a table")
            data["task"].update(file_data["task"])
        if "seed" in file_data:
            data["seed"] = file_data["seed"]
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if key != "seed" and not key.startswith("task."):
            raise ConfigError(
                f"override {text!r}: `sample` takes task.FIELD=VALUE or seed=VALUE overrides"
            )
    data = apply_overrides(data, SampleConfig, overrides)
    return from_dict(SampleConfig, data)


def render(args: argparse.Namespace) -> str:
    cfg = load_sample_config(args.config, args.overrides)
    seed = cfg.seed if args.seed is None else args.seed
    task = cfg.task
    if args.n < 0:
        raise UsageError(f"--n {args.n}: must be >= 0")
    from empirical.task.eval_sets import build_eval_set
    from empirical.task.pairs import training_generator
    from empirical.task.sampler import sample_training_batch

    family = family_of(task)
    if args.held_out:
        return "".join(f"{x} {y}\n" for x, y in family.held_out(task, seed).tolist())
    vocab = family.vocabulary(task)
    if args.split == "train":
        from empirical.model.device import resolve_device

        device = resolve_device(args.device)
        gen = training_generator(seed, device)
        held = family.held_out(task, seed)
        batch = sample_training_batch(task, args.n, gen, device, held_out=held).to("cpu")
    elif args.split in family.sample_set_names(task):
        built = build_eval_set(task, seed, args.split)
        if built is None:
            raise UsageError(
                f"--split {args.split}: this config has no such set (no held-out pair or no "
                "restricted variable for it)"
            )
        batch = built[0].slice(0, args.n)
    else:
        raise UsageError(
            f"--split {args.split!r}: unknown; use train or one of "
            f"{', '.join(family.sample_set_names(task))}"
        )
    texts = vocab.decode_tokens(batch.tokens) if args.tokens else vocab.decode(batch.tokens)
    labels = [vocab.label_text(y) for y in batch.labels.tolist()]
    return "".join(f"{t} {y}\n" for t, y in zip(texts, labels, strict=True))


def run(argv: list[str]) -> int:
    args = _parser(argv).parse_args(argv)
    try:
        out = render(args)
    except KeyError as exc:  # an unknown name reported by a lookup
        raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


main = main_of(run)

if __name__ == "__main__":
    sys.exit(main())
