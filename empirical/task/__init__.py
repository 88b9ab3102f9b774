"""The assign-and-add task: vocabulary, on-the-fly training batches, evaluation sets.

    from empirical.task import TaskConfig, Vocabulary, Batch, sample_training_batch
    from empirical.task import build_eval_sets, held_out_pairs, save_eval_sets, load_eval_sets

See docs/task.md. The public names are imported on first use (disentangled.lazy_exports):
`empirical.task.config` and the package itself import without torch.
"""

from disentangled.lazy_exports import lazy_exports

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
    "eval_set_names",
    "get_training_sampler",
    "held_out_pairs",
    "is_held",
    "load_eval_sets",
    "sample_training_batch",
    "save_eval_sets",
    "training_generator",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.task.batch": ["Batch"],
        "empirical.task.config": ["TaskConfig"],
        "empirical.task.eval_sets": [
            "EVAL_SET_NAMES",
            "EXTRA_EVAL_SET_NAMES",
            "EvalSets",
            "build_eval_set",
            "build_eval_sets",
            "eval_set_names",
            "load_eval_sets",
            "save_eval_sets",
        ],
        "empirical.task.pairs": ["derive_seed", "held_out_pairs", "is_held", "training_generator"],
        "empirical.task.sampler": [
            "TrainingSampler",
            "get_training_sampler",
            "sample_training_batch",
        ],
        "empirical.task.vocab": ["TokenizeError", "Vocabulary"],
    },
)
