"""Text from model files and servers, made safe to print on a terminal.

A GGUF's `general.name`, a file name on disk or a path a Hub server sends can hold escape
sequences that set the window title, clear the screen or move the cursor to fake earlier lines.
`printable(text)` shows every control or format character as a visible escape (`\\x1b`, `\\n`,
`\\u202e`), so what reaches the terminal is exactly the text, never a command.
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable"]

_HIDDEN = ("Cc", "Cf", "Zl", "Zp", "Cs")


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    """str(text) with control, format and separator characters shown as escapes."""
    raw = str(text)
    if raw.isprintable():
        return raw
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in raw)
