"""Training: one run (`train_run`), its metrics log, summary, phases and figure.

    from empirical.train import train_run, summary_of, detect_phases
    from empirical.config.run import load_run_config
    result = train_run(load_run_config("configs/smoke.toml"), "runs/smoke/seed0")
    summary_of(result.run_dir)["phases"]              # summary.json
    detect_phases(records)                            # the spikes of a metrics log

Modules: `loop` (train_run, resume and its checks), `session` (the phases of a training
session), `engine` (the skeleton's pieces: checks, loss windows, divergence, device),
`learners` (model, forward, optimiser step), `evaluate` (the evaluation sets' accuracy),
`phases` (spike detection), `summary` (summary.json, Figure 2), `plots`, `tensorboard`
(train.tensorboard = true), `state`, `schedule`, `optim`, `batches`, `breakdown`,
`cuda_graph`. See docs/training.md. The public names are imported on first use
(disentangled.lazy_exports): importing the package does not import torch.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "TrainResult",
    "TrainingError",
    "check_train_target",
    "detect_phases",
    "first_step_all_above",
    "summary_of",
    "train_run",
    "write_summary",
    "write_training_curves",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.train.loop": [
            "TrainResult",
            "TrainingError",
            "check_train_target",
            "summary_of",
            "train_run",
        ],
        "empirical.analysis.phases": ["detect_phases"],
        "empirical.train.summary": [
            "first_step_all_above",
            "write_summary",
            "write_training_curves",
        ],
    },
)
