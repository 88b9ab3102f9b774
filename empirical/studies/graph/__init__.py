"""What the graph family adds on top of the toolkit: the seed's ablation ladder over seeds
(`ladder`, `report`, `commands`: graph-ladder) and the recurrent model's mechanism per
iteration (`mechanism`: graph-mechanism); docs/graph.md. The task itself is
empirical/task/graph/."""

__all__ = ["commands", "ladder", "mechanism", "mechanism_command", "options", "report"]
