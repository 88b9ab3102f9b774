"""Training: one run or a batch of members, its evaluation, summary and figure; evaluating,
importing and repairing run directories.

    from empirical.train.loop import summary_of, train_run
    from empirical.runs.config import load_run_config
    result = train_run(load_run_config("configs/smoke.toml"), "runs/smoke/seed0")
    summary_of(result.run_dir)["phases"]              # summary.json

`loop` (train_run, resume), `session` (a session's phases), `engine` (the skeleton's pieces),
`learners` (model, forward, optimiser step), `optim`, `schedule`, `constraints`, `batches`,
`cuda_graph`, `evaluate` (the sets during training), `evaluate_run` (`evaluate`), `repair`,
`summary`, `breakdown`, `plots`, `tensorboard`, `state` (training checkpoints), `allocator`,
`options` (the command lines of train, evaluate and repair). See docs/training.md.
"""

__all__ = [
    "allocator", "batches", "breakdown", "constraints", "cuda_graph", "engine", "evaluate",
    "evaluate_run", "learners", "loop", "optim", "options", "plots", "repair", "schedule",
    "session", "state", "summary", "tensorboard",
]  # fmt: skip
