"""What the chain family adds on top of the toolkit: its analyses (`analysis/`), its commands
(`commands/`) and their options (`options`; docs/chain.md). The task itself is
empirical/task/chain/."""

__all__ = ["analysis", "commands", "options"]
