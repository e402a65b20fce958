"""Errors a user can cause.

Every error that a user can fix (a bad file, a missing variable, an unknown name) is raised as a
:class:`UserError`. The CLI prints its one-line message and exits with ``exit_code`` (2 by
default) without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """An error with a one-line, actionable message; the CLI exits non-zero without a traceback."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""
