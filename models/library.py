"""The folders and single files the user added to the window's library, kept where `specchat
models list` can read them without the window (whose preferences are Qt's): the command lists
every model the window lists.

The window's preferences stay the source; the window rewrites this file whenever they change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from app.durable import replace_atomically
from app.paths import data_dir
from models.partial import partial_path, remove_stale_partials

LIBRARY_FILE = "library.json"


def library_file() -> Path:
    return data_dir() / LIBRARY_FILE


def save_library(places: Sequence[Path]) -> None:
    """Replace the saved places: a reader sees the old list or the new one, never half of one.

    Written whole under a name of this process and thread alone (two windows saving at once
    must not write into one temporary file, nor rename the other's half-written one into
    place), flushed to the disk, then renamed over the file, and the rename flushed too; the
    last rename wins."""
    path = library_file()
    remove_stale_partials(path.parent)  # a killed save's copy
    text = json.dumps({"places": [str(p) for p in places]}, indent=1)

    def write(temporary: Path) -> None:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)

    replace_atomically(path, write, temporary=partial_path(path))


def library_places() -> list[Path]:
    """The saved places; none when the window never saved any or the file is unreadable."""
    try:
        data = json.loads(library_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    places = data.get("places") if isinstance(data, dict) else None
    if not isinstance(places, list):
        return []
    return [Path(p) for p in places if isinstance(p, str)]
