"""Another writer holding a folder's lock. flock locks belong to an open file description, so
a descriptor of our own, opened apart from the code under test, stands for another process."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from app.engine.folder_lock import LOCK_NAME


@contextlib.contextmanager
def lock_held_elsewhere(folder: Path) -> Iterator[None]:
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
