"""How every command reports a user error: one `error: ...` line on stderr, never a traceback."""

from __future__ import annotations

import sys

from app.errors import SpecChatError, user_message
from models.terminal import printable


def print_error(exc: SpecChatError, hint: str = "") -> None:
    """Print exc's user message, safe for a terminal, with an optional hint after it."""
    print(f"error: {printable(user_message(exc))}{hint}", file=sys.stderr)
