"""`python -m empirical sample`: print sequences of the task, one per line with its label,
e.g. `c=1,b=17,a=42,b+19=? 36` (each task family prints its own text; --tokens: the L tokens
then the label; a family labelled per position prints every label, `x12=7 x3=20 x40=4`);
--held-out prints the seed's held-out pairs `x y`. Only the `task` table and
`seed` of a config file are read; overrides are `task.FIELD=VALUE` or `seed=VALUE`. Its
options: empirical.runs.options.SampleOptions.
"""

from __future__ import annotations

import sys

from disentangled.errors import UsageError
from empirical.config.options import command_main
from empirical.model.device import resolve_device
from empirical.runs.options import SampleOptions
from empirical.task.eval_sets import build_eval_set
from empirical.task.pairs import training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import sample_training_batch


def render(opts: SampleOptions) -> str:
    """The lines `sample` prints."""
    cfg = opts.sample_config()
    seed = cfg.seed if opts.seed is None else opts.seed
    task = cfg.task
    family = family_of(task)
    if opts.held_out:
        return "".join(f"{x} {y}\n" for x, y in family.held_out(task, seed).tolist())
    vocab = family.vocabulary(task)
    if opts.split == "train":
        device = resolve_device(opts.device)
        gen = training_generator(seed, device)
        held = family.held_out(task, seed)
        batch = sample_training_batch(task, opts.n, gen, device, held_out=held).to("cpu")
    elif opts.split in family.sample_set_names(task):
        built = build_eval_set(task, seed, opts.split)
        if built is None:
            raise UsageError(
                f"--split {opts.split}: this config has no such set (no held-out pair or no "
                "restricted variable for it)"
            )
        batch = built[0].slice(0, opts.n)
    else:
        raise UsageError(
            f"--split {opts.split!r}: unknown; use train or one of "
            f"{', '.join(family.sample_set_names(task))}"
        )
    texts = vocab.decode_tokens(batch.tokens) if opts.tokens else vocab.decode(batch.tokens)
    if batch.has_targets:  # every labelled position, e.g. `x12=7 x3=20 x40=4` (graph family)
        rows = zip(batch.tokens, batch.targets, strict=True)
        labels = [vocab.targets_text(t, y) for t, y in rows]
    else:
        labels = [vocab.label_text(y) for y in batch.labels.tolist()]
    return "".join(f"{t} {y}\n" for t, y in zip(texts, labels, strict=True))


def run(opts: SampleOptions) -> int:
    try:
        out = render(opts)
    except KeyError as exc:  # an unknown name reported by a lookup
        raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


main = command_main(SampleOptions, run)

if __name__ == "__main__":
    sys.exit(main())
