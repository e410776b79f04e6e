"""The errors the command line reports to users as one line."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input or environment. The command line reports it as one
    ``error: ...`` line on stderr and exits with ``exit_code`` (1 unless said otherwise);
    the message says what went wrong and what to do."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NativeCoreError(ImportError):
    """The compiled core is missing, does not load, or was built from other sources; the
    message names the rebuild."""
