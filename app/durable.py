"""Renames that survive a power cut: a file renamed over another is only certain to be there
after a crash once the folder holding both names is on the disk too."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["fsync_folder"]


def fsync_folder(folder: Path) -> None:
    """Write `folder`'s entries (a rename just made in it) to the disk. POSIX only: elsewhere a
    folder cannot be opened to sync it, and a rename is made durable by the system itself.
    A file system that refuses is ignored: the rename has been made, only its durability is
    the system's."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
