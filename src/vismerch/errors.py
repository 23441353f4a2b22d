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


# -- typed errors of the service layer (vismerch.service); the HTTP layer maps each to a
#    status (NotFound 404, Conflict/Busy 409, Stale 412, InvalidInput/UsageError 422) and the
#    CLI keeps exit code 2 for the ones a user's input causes.


class InvalidInput(UsageError):
    """A bad value for one named input field (``field``: the parameter or JSON key)."""

    def __init__(self, field: str, message: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.field = field


class NotFound(UsageError):
    """A product, collection, rule, version, group or job that does not exist."""

    def __init__(self, kind: str, key: object, message: str | None = None, hint: str | None = None):
        super().__init__(message or f"no {kind} {key!r}", hint=hint)
        self.kind = kind
        self.key = key


class Conflict(UsageError):
    """A write that clashes with what exists (a name already taken, an immutable version)."""


class Stale(Conflict):
    """A conditional write whose ETag no longer matches: someone changed it first."""

    def __init__(self, message: str, current_etag: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint or "read it again and retry with its new ETag")
        self.current_etag = current_etag


class Busy(VismerchError):
    """A second writer while one holds the store (one ingest job at a time)."""

    def __init__(self, message: str, hint: str | None = None, job_id: int | None = None):
        super().__init__(message, hint=hint)
        self.job_id = job_id
