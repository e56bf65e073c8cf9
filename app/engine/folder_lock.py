"""One writer at a time in a folder shared by processes (two windows on one data folder).

An advisory lock (`flock`) on a file that is never deleted: a lock on a file that another process
could delete and create again would be a lock on a name no one else opens. Held for a
read-then-write: milliseconds for a journal append, up to a second or two for a whole index
file read or rewritten. A holder stuck for longer than `wait` (a stopped process) is not waited
for: a reader or a deleter goes on unlocked and says so in the log (reading a file another
writer replaces by rename is safe, and so is deleting it); a writer gives up instead
(`FolderBusyError`), since what it wrote unlocked could overwrite the holder's half-done write.
Where `flock` does not exist the lock is a no-op. The lock belongs to an open file, not to a
process: two threads of one process exclude each other as two processes do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
# How long a holder is waited for unless the caller says: far longer than any read or write
# takes, short enough that a stopped process does not hang the other window's engine.
LOCK_WAIT_S = 10.0
_POLL_SECONDS = 0.01


class FolderBusyError(Exception):
    """Another holder kept the folder's lock past the wait, and the caller asked to give up."""


@contextlib.contextmanager
def folder_lock(
    folder: Path, *, wait: float | None = None, give_up: bool = False
) -> Iterator[bool]:
    """Hold the folder's lock for the block; yields False when it went unlocked (no `flock`
    here, the lock file cannot be opened, or the holder did not let go in `wait` seconds,
    LOCK_WAIT_S by default). give_up: raise FolderBusyError instead of going on unlocked when
    the holder did not let go."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
    except ImportError:
        yield False
        return
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:  # no folder: nothing in it to guard
        yield False
        return
    except OSError as exc:
        log.warning("going on without the lock of %s (%s)", folder, exc)
        yield False
        return
    try:
        wait = LOCK_WAIT_S if wait is None else wait
        deadline = time.monotonic() + wait
        locked = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    if give_up:
                        raise FolderBusyError(f"{folder} stayed locked for {wait:.1f} s") from None
                    log.warning("%s stayed locked for %.1f s; going on without it", folder, wait)
                    break
                time.sleep(_POLL_SECONDS)
        yield locked
    finally:
        os.close(fd)  # closing the last descriptor lets go of the lock
