"""How the conversation store fails: every sqlite3.Error as a StoreError of one readable line
(app/store.py's contract), and the one lock SQLite does not wait for, retried.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

# Primary result codes (sqlite3.h): the low byte of sqlite_errorcode.
_BUSY, _LOCKED, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 13, 14, 26
_CONSTRAINT_FOREIGNKEY = 787  # an extended code: a message for a chat that no longer exists
_PERM, _AUTH = 3, 23

P = ParamSpec("P")
R = TypeVar("R")


class StoreError(Exception):
    """The conversation database cannot be used; str() is one line saying what to do."""


class StoreDamagedError(StoreError):
    """The database file is corrupt, truncated, not a database, or a folder is in its place.

    `ConversationStore.recover(path)` moves it aside (kept, never deleted) and starts fresh."""

    def __init__(self, path: Path, detail: str) -> None:
        # SQLite's integrity report can run to thousands of lines: the first says enough.
        detail = (detail.strip().splitlines() or ["unreadable"])[0][:200]
        super().__init__(
            f"the conversation database {path} is damaged ({detail}); it can be kept aside "
            "and a fresh history started"
        )
        self.path = path


class StoreFullError(StoreError):
    """The disk (or the database's size limit) is full; the write was undone, retry later."""


class StoreBusyError(StoreError):
    """Another program held the database locked for longer than the busy timeout."""


def guarded(method: Callable[P, R]) -> Callable[P, R]:
    """Turn any sqlite3.Error out of a store method into a one-line StoreError."""

    @functools.wraps(method)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            path: Path = getattr(args[0], "path")  # noqa: B009 - args[0] is the store
            raise store_error(exc, path, method.__name__.replace("_", " ")) from None

    return wrapped


def retry_while_busy(db: sqlite3.Connection, statement: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", -1) & 0xFF) in (_BUSY, _LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def store_error(exc: sqlite3.Error, path: Path, action: str) -> StoreError:
    code = getattr(exc, "sqlite_errorcode", -1) & 0xFF
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if code in (_BUSY, _LOCKED):
        return StoreBusyError(
            f"the conversation database {path} is locked by another program ({action}); "
            "close other SpecChat windows or programs using it and try again"
        )
    if code == _FULL:
        return StoreFullError(
            f"the disk holding {path} is full ({action}); nothing was saved: free some space "
            "and try again"
        )
    if code in (_CORRUPT, _NOTADB):
        return StoreDamagedError(path, detail)
    if getattr(exc, "sqlite_errorcode", -1) == _CONSTRAINT_FOREIGNKEY:
        # The schema's only foreign key: the chat was deleted, by another window on the same
        # data folder (this one closes a chat it deletes).
        return StoreError(f"the chat no longer exists in {path}: it was deleted in another window")
    if code in (_READONLY, _CANTOPEN, _PERM, _AUTH):
        return StoreError(
            f"cannot write the conversation database {path} ({detail}); "
            f"check that it and {path.parent} are writable"
        )
    return StoreError(f"the conversation database {path} failed ({action}): {detail}")
