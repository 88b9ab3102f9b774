"""The error contract of `python -m disentangled`, `-m theory` and `-m empirical`: a problem the
user can fix (a bad value, a missing or corrupt file, a run directory in use) is a `UserError`;
the entry point (disentangled.command_line.run_main) prints it as one line `error: ...` on
stderr and exits with status 2 (EXIT_USER_ERROR), never with a traceback; Ctrl-C exits with
130 (EXIT_INTERRUPTED). Bad command-line arguments are a `UsageError`; a bad config value is
empirical.config.io.ConfigError, also a UserError.

It lives in the lowest package because `theory` builds on `disentangled` and `empirical` on
both (nothing here imports either of them).
"""

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A problem the user can fix (a bad value, a missing file, a run directory in use):
    the command line prints `error: <message>` and exits with status 2."""


class UsageError(UserError, ValueError):
    """Bad command-line arguments."""
