"""One error family for vismerch: a message, a hint that says the fix, and an exit code.

Exit codes follow DESIGN.md: 1 = a job failed, 2 = bad usage or bad input.
"""

from __future__ import annotations


class VismerchError(Exception):
    """Base error: ``message`` says what is wrong, ``hint`` says how to fix it."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UsageError(VismerchError):
    """Bad arguments or configuration (exit 2)."""

    exit_code = 2


class SourceError(UsageError):
    """A folder or manifest that cannot be read as a catalog (names the file and row)."""


class StoreError(VismerchError):
    """A store directory that is missing, locked, or of an unknown schema version."""


class DecodeError(VismerchError):
    """An image refused by the safe decoder. ``reason`` is a short stable code
    (``empty-file``, ``truncated``, ``not-an-image``, ``too-many-pixels``, ...)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class JobFailed(VismerchError):
    """A job that ran but produced nothing useful (exit 1)."""


class UnknownName(UsageError):
    """A registry lookup for a name that is not registered."""
