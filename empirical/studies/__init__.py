"""What a task family adds on top of the toolkit, one package per family (`chain/`, `lego/`):
its analyses and its commands; `registry` lists them for the dispatcher (ANALYSES: what
`analyze` runs on a run of the family; COMMANDS: the commands a family adds), `options` holds
the options of `analyze` (every family's). The task itself (fields, vocabulary, sampler,
evaluation sets) is the family's package under empirical/task/."""

__all__ = ["chain", "lego", "options", "registry"]
