"""Python code that llama.cpp calls back (its log, a load's progress) and the signals that land
in it.

An exception raised in a ctypes callback never reaches the caller: ctypes prints "Exception
ignored" and carries on, so a Ctrl-C whose handler raised while llama.cpp was logging a load's
progress was lost, and the command ran to its end. A handler asks `raise_or_defer` instead: in a
callback the exception is kept, the load's progress callback then cancels the load, and the
code that called into llama.cpp raises it on return (`raise_deferred`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()
# Signal handlers run in the main thread only, so one slot is enough.
_deferred: BaseException | None = None


@contextmanager
def in_callback() -> Iterator[None]:
    """Marks this thread as running a callback from llama.cpp."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def raise_or_defer(exc: BaseException) -> None:
    """Raise `exc` here, or keep it for `raise_deferred` when this thread is in a callback."""
    global _deferred  # noqa: PLW0603 - a signal's one slot, process-wide
    if getattr(_local, "depth", 0):
        _deferred = _deferred or exc
        return
    raise exc


def deferred() -> bool:
    """Whether an exception waits for the native call to return (a load should stop now)."""
    return _deferred is not None


def raise_deferred() -> None:
    """Raise what a handler kept while llama.cpp was calling back, if anything."""
    global _deferred
    exc, _deferred = _deferred, None
    if exc is not None:
        raise exc
