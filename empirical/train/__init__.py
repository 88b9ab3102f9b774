"""Training: one run (`train_run`), its metrics log, summary, phases and figure.

    from empirical.train import train_run, summary_of, detect_phases
    from empirical.runs.config import load_run_config
    result = train_run(load_run_config("configs/smoke.toml"), "runs/smoke/seed0")
    summary_of(result.run_dir)["phases"]              # summary.json
    detect_phases(records)                            # the spikes of a metrics log

`loop` (train_run, resume), `session` (a session's phases), `engine` (the skeleton's pieces),
`learners` (model, forward, optimiser step), `evaluate`, `summary`, `plots`, `tensorboard`, ...
See docs/training.md. Names are imported on first use (no torch at import).
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "TrainResult", "TrainingError", "check_train_target", "detect_phases", "first_step_all_above",
    "summary_of", "train_run", "write_summary", "write_training_curves",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.train.loop": [
            "TrainResult", "TrainingError", "check_train_target", "summary_of", "train_run",
        ],
        "empirical.runs.phases": ["detect_phases"],
        "empirical.train.summary": [
            "first_step_all_above", "write_summary", "write_training_curves",
        ],
    },
)  # fmt: skip
