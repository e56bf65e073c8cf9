"""A JSON schema's `pattern`s as llama-cpp-python's grammar converter can hold them.

Two gaps between the converter and JSON Schema (2020-12, 6.3.3):
- JSON Schema matches a pattern anywhere in the string, unanchored (Pydantic's
  `Field(pattern="[A-Z]{3}")` emits it so), while the converter takes only `^...$` and refuses
  the rest. A pattern missing an anchor gets `.*` on that side, around it as one group: each
  string the grammar then allows contains a match, as the schema asks.
- The converter writes a pattern's `.` and character classes into the grammar as they are, so
  `.`, `[^,]` or `[ -~]` let a reply put a raw `"`, `\\` or control character inside a JSON
  string, and the reply is no JSON. Here `.` and every class leave those out (the string then
  holds fewer characters than the schema allows, never a reply that does not parse).
"""

from __future__ import annotations

from typing import Any

from app.server.schema_support import rewrite_nodes

# What a character of a JSON string may be without an escape, as the grammar's own strings
# (app/server/structured.py) allow it.
JSON_STRING_CHAR = r'[^"\\\x7F\x00-\x1F]'
_NOT_IN_STRINGS = '"\\\\\\x7F\\x00-\\x1F'  # the same set, as a class body: " \\ \x7F \x00-\x1F
_EXCLUDED = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F))  # sorted, apart


def json_patterns(schema: Any) -> Any:
    """The schema with every string `pattern` anchored and JSON-safe (see the module)."""

    def rewrite(_path: str, node: dict[str, Any]) -> dict[str, Any]:
        pattern = node.get("pattern")
        if isinstance(pattern, str) and node.get("type", "string") == "string":
            node["pattern"] = _json_safe(_anchored(pattern))
        return node

    return rewrite_nodes(schema, rewrite)


def _anchored(pattern: str) -> str:
    starts = pattern.startswith("^")
    ends = pattern.endswith("$") and not _escaped(pattern, len(pattern) - 1)
    if starts and ends and len(pattern) > 1:
        return pattern
    core = pattern[1 if starts else 0 : len(pattern) - 1 if ends else len(pattern)]
    return f"^{'' if starts else '.*'}({core}){'' if ends else '.*'}$"


def _escaped(text: str, index: int) -> bool:
    """Whether the character at index follows an odd run of backslashes."""
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _json_safe(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "[":
            end = _class_end(pattern, i)
            out.append(_safe_class(pattern[i + 1 : end]))
            i = end + 1
        elif c == ".":
            out.append(JSON_STRING_CHAR)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index of the `]` closing the class opened at start (the converter's own reading:
    a backslash escapes the next character); len(pattern) when it is not closed."""
    i = start + 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i


def _safe_class(body: str) -> str:
    if body.startswith("^"):
        return f"[{body}{_NOT_IN_STRINGS}]"
    items = _class_items(body)
    if items is None:  # an escape this reading cannot place (\d, \w, ...): left as it is
        return f"[{body}]"
    kept = [_range_text(a, b) for low, high in items for a, b in _outside_excluded(low, high)]
    return f"[{''.join(kept)}]" if kept else JSON_STRING_CHAR


def _outside_excluded(low: int, high: int) -> list[tuple[int, int]]:
    """The parts of low..high that a JSON string may hold unescaped."""
    parts = []
    for gap_low, gap_high in _EXCLUDED:
        if low > high:
            break
        if gap_high < low or gap_low > high:
            continue
        if low < gap_low:
            parts.append((low, gap_low - 1))
        low = max(low, gap_high + 1)
    if low <= high:
        parts.append((low, high))
    return parts


def _class_items(body: str) -> list[tuple[int, int]] | None:
    """A positive class's ranges as code points; None when it holds an escape other than a
    single escaped character (\\x.., \\u...., or a backslashed punctuation mark)."""
    chars: list[int] = []
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(body):
        code, i = _class_char(body, i)
        if code is None:
            return None
        if i + 1 < len(body) and body[i] == "-":
            high, after = _class_char(body, i + 1)
            if high is None:
                return None
            ranges.append((code, high))
            i = after
        else:
            chars.append(code)
    return [*((c, c) for c in chars), *ranges]


def _class_char(body: str, i: int) -> tuple[int | None, int]:
    if body[i] != "\\":
        return ord(body[i]), i + 1
    if i + 1 >= len(body):
        return None, i + 1
    kind = body[i + 1]
    width = {"x": 2, "u": 4, "U": 8}.get(kind)
    if width is not None:
        digits = body[i + 2 : i + 2 + width]
        try:
            return int(digits, 16), i + 2 + width
        except ValueError:
            return None, i + 2
    if kind.isalnum():  # \d, \w, \s, \n, ...: a set or a control, not placed here
        return None, i + 2
    return ord(kind), i + 2


def _range_text(low: int, high: int) -> str:
    first = _class_text(low)
    return first if low == high else f"{first}-{_class_text(high)}"


def _class_text(code: int) -> str:
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"
