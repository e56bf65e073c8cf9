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

from app.paths import data_dir

LIBRARY_FILE = "library.json"


def library_file() -> Path:
    return data_dir() / LIBRARY_FILE


def save_library(places: Sequence[Path]) -> None:
    """Replace the saved places (written whole, then renamed: a reader never sees half)."""
    path = library_file()
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"places": [str(p) for p in places]}, indent=1))
    os.replace(temporary, path)


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
