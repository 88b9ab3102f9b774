"""The assign-and-add task: vocabulary, on-the-fly training batches, evaluation sets.

    from empirical.task import TaskConfig, Vocabulary, Batch, sample_training_batch
    from empirical.task import build_eval_sets, held_out_pairs, save_eval_sets, load_eval_sets

See docs/task.md.
"""

from empirical.task.batch import Batch
from empirical.task.config import TaskConfig
from empirical.task.eval_sets import (
    EVAL_SET_NAMES,
    EXTRA_EVAL_SET_NAMES,
    EvalSets,
    build_eval_set,
    build_eval_sets,
    load_eval_sets,
    save_eval_sets,
)
from empirical.task.pairs import derive_seed, held_out_pairs, is_held, training_generator
from empirical.task.sampler import TrainingSampler, get_training_sampler, sample_training_batch
from empirical.task.vocab import TokenizeError, Vocabulary

__all__ = [
    "EVAL_SET_NAMES",
    "EXTRA_EVAL_SET_NAMES",
    "Batch",
    "EvalSets",
    "TaskConfig",
    "TokenizeError",
    "TrainingSampler",
    "Vocabulary",
    "build_eval_set",
    "build_eval_sets",
    "derive_seed",
    "get_training_sampler",
    "held_out_pairs",
    "is_held",
    "load_eval_sets",
    "sample_training_batch",
    "save_eval_sets",
    "training_generator",
]
