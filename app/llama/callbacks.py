"""Python code that llama.cpp calls back (its log, a load's progress) and the signals that land
in it.

An exception raised in a ctypes callback never reaches the caller: ctypes prints "Exception
ignored" and carries on, so a Ctrl-C whose handler raised while llama.cpp was logging a load's
progress was lost, and the command ran to its end. A handler asks `raise_or_defer` instead: in a
callback the exception is kept, the load's progress callback then cancels the load, and the
code that called into llama.cpp raises it on return (`raise_deferred`).

Whether a handler runs in a callback is read from the frames it interrupted, not from a flag
the callback sets: Python may run a handler before the callback's first line.

The same holds for a model pass: Python cannot run a handler while llama_decode runs, so a
second Ctrl-C waited for a prompt batch (up to 512 tokens: seconds to minutes on a big model on
a CPU). While the commands' handlers are installed (`abortable_passes`), a long pass on the main
thread gets llama.cpp's abort callback, which llama.cpp calls between the graph's nodes: Python
runs a pending handler there, and the pass stops at the next node once an exception waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

_callback_code: set[CodeType] = set()
# Signal handlers run in the main thread only, so one slot is enough.
_deferred: BaseException | None = None
_abortable_depth = [0]


def native_callback(function: F) -> F:
    """Marks `function` as one that llama.cpp calls back (see the module's text)."""
    _callback_code.add(function.__code__)
    return function


def in_callback(frame: FrameType | None) -> bool:
    """Whether `frame`, or a frame it was called from, runs a marked callback."""
    while frame is not None:
        if frame.f_code in _callback_code:
            return True
        frame = frame.f_back
    return False


def raise_or_defer(exc: BaseException, frame: FrameType | None) -> None:
    """For a signal handler: raise `exc` here, or keep it for `raise_deferred` when the
    interrupted `frame` is inside a callback from llama.cpp."""
    global _deferred  # noqa: PLW0603 - a signal's one slot, process-wide
    if in_callback(frame):
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


@contextmanager
def abortable_passes() -> Iterator[None]:
    """While open, long passes on the main thread stop when a signal's exception waits."""
    _abortable_depth[0] += 1
    try:
        yield
    finally:
        _abortable_depth[0] -= 1


def passes_abortable() -> bool:
    return _abortable_depth[0] > 0
