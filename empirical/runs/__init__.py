"""A run as data: its config (`config`: RunConfig, TrainConfig), its directory (`rundir`: the
files it holds; `lock`: one writer at a time), its metrics log (`metrics_log`), what the log
says (`phases`, `set_timeline`, `names`: the plain names of what it records), loading a run
(`load`), importing the paper authors' checkpoints as one (`import_run`), and the command
lines of import-checkpoints, unlock and sample (`options`)."""

__all__ = ["config", "import_run", "load", "lock", "metrics_log", "names", "options", "phases",
           "rundir", "set_timeline"]  # fmt: skip
