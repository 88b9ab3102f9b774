"""The task: its config, vocabulary, on-the-fly training batches, evaluation sets (docs/task.md).

    from empirical.task.config import TaskConfig, task_config    # one config class per family
    from empirical.task.registry import family_of                # the family of a config
    from empirical.task.sampler import sample_training_batch, run_training_sampler
    from empirical.task.eval_sets import build_eval_sets, save_eval_sets, load_eval_sets
    from empirical.task.pairs import held_out_pairs, training_generator

Each family is a package here (assign_add/, chain/, lego/: its config, vocabulary, sampler and
evaluation sets) behind one interface (family.py), listed by the registry (registry.py).
"""

# the shared modules; the families' packages are reached through the registry
__all__ = ["batch", "config", "eval_sets", "family", "pairs", "registry", "sampler", "vocab"]
