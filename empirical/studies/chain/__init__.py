"""What the chain family adds on top of the toolkit: its analyses (`analysis/`) and commands
(`commands/`; docs/chain.md). The task itself is empirical/task/chain/."""

__all__ = ["analysis", "commands"]
