"""The fixed sequences the analyses read: our probe data (`make_probe_data`, drawn once from
the task's *unrestricted* distribution: every variable at both operand positions, no held-out
pairs, equal thirds of 0-, 1- and 2-var sequences) and the authors' batches
(`authors_batches`, their progress_measures.py's distribution drawn with our sampler; only the
`@authors` measures read them). docs/analysis.md, "Conventions".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from empirical.task.assign_add.draw import TrainingSampler
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.pairs import derive_seed
from empirical.task.registry import family_of
from empirical.task.vocab import Vocabulary

# what analysis.json says of the probe data (`ProbeData.describe`)
PROBE_DISTRIBUTION = (
    "unrestricted (every variable at both operand positions, no held-out pairs), equal "
    "thirds of 0/1/2-var"
)
AUTHORS_DISTRIBUTION = (
    "the authors' measure batches: unrestricted, a third 0-var, two thirds 1-var (variable "
    "first or second equally), no 2-var"
)
# their batch sizes (progress_measures.py: generate_eval_batch 512, probe 1024 / 256)
EVAL_SIZE = 512
PROBE_TRAIN_SIZE = 1024
PROBE_TEST_SIZE = 256

# -- the unrestricted distribution -----------------------------------------------------
def unrestricted_task(task: TaskConfig, frac_1var: float = 1 / 3, ratio: float = 1.0):
    """`task` with no variable-position restriction and no held-out pair, and the given mix
    (default: equal thirds of 0-, 1- and 2-var sequences)."""
    return dataclasses.replace(
        task, r1=(), r2=(), held_out_fraction=0.0, train_pairs_file="", mix="fractions",
        two_var_frequency=1.0, frac_1var=frac_1var, ratio_2var_to_0var=ratio,
    )  # fmt: skip


def sample_unrestricted(
    task: TaskConfig, n: int, seed: int, tag: str, frac_1var: float = 1 / 3, ratio: float = 1.0
) -> Batch:
    """n sequences of the unrestricted distribution (see `unrestricted_task`), on the CPU,
    deterministic in (task, n, seed, tag)."""
    cfg = unrestricted_task(task, frac_1var, ratio)
    sampler = TrainingSampler(cfg, torch.zeros((0, 2), dtype=torch.long))
    gen = torch.Generator().manual_seed(derive_seed(seed, "analysis", tag))
    return sampler.sample(n, gen)


def second_operand_batch(task: TaskConfig, n: int, seed: int) -> Batch:
    """Sequences whose second operand (position L-2) is a variable: 1-var and 2-var sequences
    of the unrestricted distribution, so every variable sits there about equally often."""
    batch = sample_unrestricted(task, n, seed, "second", frac_1var=0.5, ratio=float("inf"))
    return batch[batch.operand_vars[:, 1] >= 0]


# -- the authors' batches ---------------------------------------------------------------
@dataclass
class AuthorsBatches:
    """Their measure batch (`eval`) and probe batches (`train`, `test`), drawn with our
    sampler from their distribution: thirds of 0-var, variable-first and variable-second
    sequences, unrestricted."""

    eval: Batch
    train: Batch
    test: Batch


def authors_batches(task: TaskConfig, seed: int = 0) -> AuthorsBatches:
    def draw(n: int, tag: str) -> Batch:
        return sample_unrestricted(task, n, seed, tag, frac_1var=2 / 3, ratio=0.0)

    return AuthorsBatches(
        eval=draw(EVAL_SIZE, "authors-eval"),
        train=draw(PROBE_TRAIN_SIZE, "authors-probe-train"),
        test=draw(PROBE_TEST_SIZE, "authors-probe-test"),
    )


# -- our probe data --------------------------------------------------------------------
@dataclass
class ProbeData:
    """The fixed sequences every per-snapshot measure reads (built once, reused).

    test: n sequences, unrestricted distribution, equal thirds 0/1/2-var (attention measures,
        the probes' held-out split). train: another n of the same distribution (probe
        training). second: sequences with a variable as second operand (Figure 9).
    authors: the authors' measure and probe batches (0-/1-var only, `AuthorsBatches`), for
        the `@authors` variants (empirical.analysis.authors); None: not computed.
    """

    task: TaskConfig
    seed: int
    test: Batch
    train: Batch
    second: Batch
    authors: AuthorsBatches | None = None

    @property
    def vocab(self) -> Vocabulary:
        return family_of(self.task).vocabulary(self.task)

    def describe(self) -> dict:
        """The distribution and sizes (ours, and the authors' batches if drawn): analysis.json's
        "probe_data"."""
        authors = None
        if self.authors is not None:
            authors = {
                "distribution": AUTHORS_DISTRIBUTION,
                "n_eval": len(self.authors.eval),
                "n_probe_train": len(self.authors.train),
                "n_probe_test": len(self.authors.test),
            }
        return {
            "distribution": PROBE_DISTRIBUTION,
            "n_test": len(self.test),
            "n_train": len(self.train),
            "n_second_operand": len(self.second),
            "authors_batches": authors,
        }


def make_probe_data(
    task: TaskConfig, seed: int = 0, n: int = 2048, n_second: int = 1536, authors: bool = True
):
    """ProbeData for `task`, deterministic in (task, seed, n, n_second); with `authors`, also
    the authors' batches (fixed sizes 512 / 1024 / 256) for the `@authors` measures."""
    return ProbeData(
        task=task,
        seed=int(seed),
        test=sample_unrestricted(task, n, seed, "probe-test"),
        train=sample_unrestricted(task, n, seed, "probe-train"),
        second=second_operand_batch(task, n_second, seed),
        authors=authors_batches(task, seed) if authors else None,
    )
