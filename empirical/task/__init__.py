"""The task: its config, vocabulary, on-the-fly training batches, evaluation sets.

    from empirical.task import TaskConfig, Vocabulary, Batch, sample_training_batch
    from empirical.task import build_eval_sets, held_out_pairs, save_eval_sets, load_eval_sets

What the data is depends on the config's task family (empirical.families: assign_add, the
paper's task, and the others); these functions ask the family. `TrainingSampler`,
`EVAL_SET_NAMES` and `Vocabulary` are the assign_add family's; `training_sampler(cfg,
held_out, device)` builds any family's sampler. See docs/task.md. The public names are
imported on first use (disentangled.lazy_exports): `empirical.config.task` and the package
itself import without torch.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "Batch",
    "EVAL_SET_NAMES",
    "EXTRA_EVAL_SET_NAMES",
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
    "run_training_sampler",
    "sample_training_batch",
    "save_eval_sets",
    "training_generator",
    "training_sampler",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.task.batch": ["Batch"],
        "empirical.config.task": ["TaskConfig"],
        "empirical.families.assign_add.eval_sets": ["EVAL_SET_NAMES"],
        "empirical.families.assign_add.fields": ["EXTRA_EVAL_SET_NAMES"],
        "empirical.families.assign_add.draw": ["TrainingSampler"],
        "empirical.task.eval_sets": [
            "EvalSets",
            "build_eval_set",
            "build_eval_sets",
            "eval_set_names",
            "load_eval_sets",
            "save_eval_sets",
        ],
        "empirical.task.pairs": ["derive_seed", "held_out_pairs", "is_held", "training_generator"],
        "empirical.task.sampler": [
            "get_training_sampler",
            "run_training_sampler",
            "sample_training_batch",
            "training_sampler",
        ],
        "empirical.task.vocab": ["TokenizeError", "Vocabulary"],
    },
)
