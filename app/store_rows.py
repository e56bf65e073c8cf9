"""Values read back from the conversations file, never taken on trust.

SQLite keeps any value in any column (a column's type is an affinity, not a check), so a file
edited by another program, or damaged where `PRAGMA quick_check` does not look, can hold a title
that is a BLOB or a reply's stats that are not JSON. Such a field reads as the plain value of its
kind (bytes as UTF-8 text, anything else as nothing) and is logged once per read: the chat still
lists and opens with its text, where one bad field used to stop the window from starting or a
chat from opening.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


def text(value: object, field: str) -> str:
    if isinstance(value, str):
        return value
    _damaged(field, value, "text")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def seconds(value: object, field: str) -> float:
    """A time stamp (seconds since the epoch)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    _damaged(field, value, "0")
    return 0.0


def stats(value: object, field: str) -> dict[str, Any] | None:
    """A reply's stats: a JSON object, or None."""
    if not value:
        return None
    parsed = _json(value)
    if isinstance(parsed, dict):
        return parsed
    _damaged(field, value, "none")
    return None


def runs(value: object, field: str) -> list[tuple[str, object]] | None:
    """A reply's highlighted runs: a JSON list of [text, source] pairs, or None (the reply then
    shows unhighlighted)."""
    if not value:
        return None
    parsed = _json(value)
    if isinstance(parsed, list) and all(
        isinstance(run, list) and len(run) == 2 and isinstance(run[0], str) for run in parsed
    ):
        return [(run[0], run[1]) for run in parsed]
    _damaged(field, value, "none")
    return None


def _json(value: object) -> object:
    try:
        return json.loads(value) if isinstance(value, str | bytes) else None
    except (ValueError, RecursionError):
        return None  # the caller names what it could not read


def _damaged(field: str, value: object, read_as: str) -> None:
    log.warning("conversations file: %s holds %s; read as %s", field, _shape(value), read_as)


def _shape(value: object) -> str:
    if isinstance(value, str | bytes):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"
