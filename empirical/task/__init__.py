"""The task: its config, vocabulary, on-the-fly training batches, evaluation sets (docs/task.md).

    from empirical.task import TaskConfig, Vocabulary, Batch, sample_training_batch
    from empirical.task import build_eval_sets, held_out_pairs, save_eval_sets, load_eval_sets

The data is the config's task family's (empirical.task.registry); `TrainingSampler`,
`EVAL_SET_NAMES` and `Vocabulary` are the assign_add family's. The names are imported on first
use (disentangled.lazy_exports), so the package imports without torch.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "Batch", "EVAL_SET_NAMES", "EXTRA_EVAL_SET_NAMES", "EvalSets", "TaskConfig", "TokenizeError",
    "TrainingSampler", "Vocabulary", "build_eval_set", "build_eval_sets", "derive_seed",
    "eval_set_names", "get_training_sampler", "held_out_pairs", "is_held", "load_eval_sets",
    "run_training_sampler", "sample_training_batch", "save_eval_sets", "training_generator",
    "training_sampler",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.task.batch": ["Batch"],
        "empirical.task.config": ["TaskConfig"],
        "empirical.task.assign_add.eval_sets": ["EVAL_SET_NAMES"],
        "empirical.task.assign_add.fields": ["EXTRA_EVAL_SET_NAMES"],
        "empirical.task.assign_add.draw": ["TrainingSampler"],
        "empirical.task.eval_sets": ["EvalSets", "build_eval_set", "build_eval_sets",
                                     "eval_set_names", "load_eval_sets", "save_eval_sets"],
        "empirical.task.pairs": ["derive_seed", "held_out_pairs", "is_held", "training_generator"],
        "empirical.task.sampler": ["get_training_sampler", "run_training_sampler",
                                   "sample_training_batch", "training_sampler"],
        "empirical.task.vocab": ["TokenizeError", "Vocabulary"],
    },
)  # fmt: skip
