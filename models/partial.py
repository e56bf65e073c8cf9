"""Where a derived model file (or the library's list, models/library.py) is written before it
is whole.

Beside its final name and unique to this process and thread, so two writers of the same file
(two windows started at once, two test runs sharing a model cache) never write into one file:
each writes its own copy and renames it into place whole (os.replace is atomic), the last one
winning. The name still ends in `.partial`, which model discovery passes over.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path

from app.leftovers import process_alive

__all__ = ["partial_path", "remove_stale_partials"]

# partial_path's names: "<final name>.<pid>-<thread id>.partial".
_PARTIAL_NAME = re.compile(r".+\.(\d+)-\d+\.partial")


def partial_path(dst: Path) -> Path:
    return dst.with_name(f"{dst.name}.{os.getpid()}-{threading.get_ident()}.partial")


def remove_stale_partials(folder: Path) -> list[Path]:
    """Remove the `.partial` files in `folder` left by writers that no longer run (a killed
    make-draft, prune or synthetic-model write), and return them. A file whose process is alive,
    or whose pid now belongs to another process, is kept: it may still be being written."""
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            found = _PARTIAL_NAME.fullmatch(entry.name)
            if found is None or process_alive(int(found.group(1))):
                continue
            with contextlib.suppress(OSError):
                entry.unlink()
                removed.append(entry)
    return removed
