"""What the lego family adds on top of the toolkit: its association attention (`analysis`) and
`analyze` on a lego run (`commands`; docs/lego.md). The task itself is empirical/task/lego/."""

__all__ = ["analysis", "commands"]
