"""What a process leaves on disk under its own id, and how a later process tells whether the
one that left it still runs.

A process killed outright (SIGKILL, a power cut) cleans nothing up; files and folders named by
its process id can be removed by the next one once that process has ended, and never while it
runs. `.partial` model files (models/partial.py) and the draft index's rewrites
(app/engine/corpus_files.py) are named so; so are the scratch folders made here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["process_alive", "remove_orphaned_scratch_dirs", "scratch_dir"]

_SCRATCH_PREFIX = "specchat-"
# scratch_dir's names: "specchat-<kind>-<pid>-<tempfile's random part>".
_SCRATCH_NAME = re.compile(r"specchat-[a-z]+-(\d+)-[a-z0-9_]+")


def process_alive(pid: int) -> bool:
    """Whether process `pid` may still run; True wherever that cannot be asked, so that what a
    live process owns is never taken for a leftover."""
    if os.name != "posix":  # there os.kill(pid, 0) ends the process instead of asking about it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True  # another user's process (or a number we cannot ask about): keep its files
    return True


def scratch_dir(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A private temporary folder named by this process, removed when it is cleaned up (or by
    a later scratch_dir once this process has ended without doing so). kind: lower-case letters
    saying which command made it ("serve", "bench")."""
    if not kind.isalpha() or not kind.islower():
        raise ValueError(f"a scratch folder's kind is lower-case letters, got {kind!r}")
    remove_orphaned_scratch_dirs()
    return tempfile.TemporaryDirectory(prefix=f"{_SCRATCH_PREFIX}{kind}-{os.getpid()}-")


def remove_orphaned_scratch_dirs(folder: Path | None = None) -> list[Path]:
    """Remove the scratch folders in `folder` (the system's temporary folder by default) whose
    process has ended, and return them. Only this user's own folders are looked at: the
    temporary folder is shared, and another user's names prove nothing."""
    root = Path(folder if folder is not None else tempfile.gettempdir())
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            found = _SCRATCH_NAME.fullmatch(entry.name)
            if found is None or process_alive(int(found.group(1))) or not _own_folder(entry):
                continue
            with contextlib.suppress(OSError):
                shutil.rmtree(entry)
                removed.append(entry)
    return removed


def _own_folder(path: Path) -> bool:
    """A real folder (not a link to one) that this user owns."""
    try:
        info = path.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):  # lstat: a link reads as a link
        return False
    return os.name != "posix" or info.st_uid == os.getuid()
