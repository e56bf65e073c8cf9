"""Files replaced so that they survive a crash and a power cut: written whole under another
name, flushed to the disk, renamed over the old one in one step, and the rename flushed too (a
file renamed over another is only certain to be there after a crash once the folder holding
both names is on the disk)."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["fsync_folder", "replace_atomically", "replace_file"]


def replace_atomically(
    path: Path, write: Callable[[Path], object], *, temporary: Path | None = None
) -> None:
    """Have `write` make the new file at `temporary`, then put it in place of `path`: a reader,
    or a restart after a crash, finds the old file whole or the new one whole, never half of
    one, and once this returns a power cut brings back neither the old file nor an empty one.

    temporary: beside `path` (a rename does not cross file systems); by default a hidden name
    no other call uses. A caller whose leftovers of killed runs are cleaned by their name
    passes its own. Whatever `write` or the steps after it raise is raised as it came, the
    temporary file removed first."""
    if temporary is None:
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    try:
        write(temporary)
        # Else a power cut after the rename could leave the new name on blocks never written.
        _fsync_file(temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):  # never in place of the error that got here
            temporary.unlink(missing_ok=True)
        raise
    # Else a power cut soon after could bring back the old file, or none.
    fsync_folder(path.parent)


def _fsync_file(path: Path) -> None:
    # Windows flushes only a handle open for writing; POSIX flushes the file through any
    # handle, and a read-only one also serves a file `write` left without write permission.
    fd = os.open(path, os.O_RDONLY if os.name == "posix" else os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def replace_file(path: Path, write: Callable[[Path], object]) -> None:
    """Have `write` make the file under a temporary name beside `path`, then rename it over
    `path` in one step (replace_atomically): a write cut short (a second signal, a full disk)
    leaves the file that was there whole, never half a report in its place. What a rename cannot
    replace is written in place: a device or a link (`/dev/stdout`: renamed over, the output
    would miss the stream it names) and a file in a folder this process may not write. A file
    replaced keeps the permissions the old one had."""
    if not _replaceable(path):
        write(path)
        return
    try:
        kept_mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        kept_mode = None

    def write_keeping_mode(temporary: Path) -> None:
        write(temporary)
        # A file the user made private (an exported chat at 0600) stays private when written
        # again: the new file is otherwise created with the process's default permissions.
        if kept_mode is not None:
            os.chmod(temporary, kept_mode)

    replace_atomically(path, write_keeping_mode)


def _replaceable(path: Path) -> bool:
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return False
    return os.access(path.parent, os.W_OK)
