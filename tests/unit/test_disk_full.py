"""One test of a full disk for the store and ingest: its errno, sqlite's code, a worker's text."""

from __future__ import annotations

import errno
import sqlite3

from vismerch.catalog.dbfile import disk_full


def test_a_full_disk_is_recognised_however_it_arrives():
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    assert disk_full(full)
    assert disk_full("Traceback ...\nOSError: [Errno 28] No space left on device")  # a worker's text
    assert disk_full(sqlite3.OperationalError("database or disk is full"))  # code not set


def test_other_errors_are_not_a_full_disk():
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = sqlite3.SQLITE_BUSY
    assert not disk_full(locked)
    assert not disk_full("ValueError: cannot identify image file")
