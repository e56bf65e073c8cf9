"""A JSON schema's `pattern`s as llama-cpp-python's grammar converter can hold them.

The converter takes a pattern as a regular expression over the characters between a JSON
string's quotes, and writes it into the grammar nearly as it stands. Three gaps are closed here:
- JSON Schema matches a pattern anywhere in the string, unanchored (Pydantic's
  `Field(pattern="[A-Z]{3}")` emits it so), while the converter takes only `^...$` and refuses
  the rest. A pattern missing an anchor gets `.*` on that side, around it as one group: each
  string the grammar then allows contains a match, as the schema asks.
- `.`, a class (`[^,]`, `[ -~]`) or an escape (`\\s`) would let a reply put a raw `"`, `\\` or
  control character inside the string, and the reply would be no JSON: every set of characters
  here leaves those out (the string then holds fewer characters than the schema allows, never a
  reply that does not parse). A pattern that needs one of them (`"`, `\\n`) is refused.
- Escapes llama.cpp's grammar does not know (`\\.`, `\\d`, `\\w`) are written as classes.
Whatever cannot be held so (an anchor inside the pattern, a back-reference, an unclosed class)
is refused with PatternError, which the server turns into a 400 naming the pattern's place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.server.schema_support import rewrite_nodes

# Code points a JSON string holds only escaped (RFC 8259: controls, `"` and `\`), and DEL,
# which llama.cpp's own converter leaves out too: sorted, apart.
_EXCLUDED = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F))
# Characters the converter keeps as literals once unescaped (its ESCAPED_IN_REGEXPS...).
_CONVERTER_UNESCAPES = frozenset("[]()|{}*+?")
_SHORTHANDS = {
    "d": ((0x30, 0x39),),
    "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "s": ((0x09, 0x0D), (0x20, 0x20)),  # JSON-safe, only the space is left
}
_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}

Ranges = Sequence[tuple[int, int]]


class PatternError(ValueError):
    """A pattern the grammar cannot hold inside a JSON string; the text says why."""


def _class_body(ranges: Ranges) -> str:
    return "".join(_range_text(low, high) for low, high in ranges)


def _range_text(low: int, high: int) -> str:
    first = _class_text(low)
    return first if low == high else f"{first}-{_class_text(high)}"


def _class_text(code: int) -> str:
    """A code point as a class member reads it alike in llama.cpp's grammar and in Python's re:
    letters and digits as they are, anything else as a hex escape."""
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


_EXCLUDED_BODY = _class_body(_EXCLUDED)
# One character of a JSON string that needs no escape.
JSON_STRING_CHAR = f"[^{_EXCLUDED_BODY}]"


def json_patterns(schema: Any) -> Any:
    """The schema with every string `pattern` anchored and JSON-safe (see the module);
    PatternError naming the pattern's place for one that cannot be."""

    def rewrite(path: str, node: dict[str, Any]) -> dict[str, Any]:
        pattern = node.get("pattern")
        if isinstance(pattern, str) and node.get("type", "string") == "string":
            try:
                node["pattern"] = _anchored(_json_safe(pattern))
            except PatternError as exc:
                raise PatternError(f"the pattern at {path} {exc}") from None
        return node

    return rewrite_nodes(schema, rewrite)


def _anchored(pattern: str) -> str:
    """^(...)$ over the pattern's alternatives, each with .* on a side it left unanchored (an
    alternative's anchors are its own: `^a|b$` is `^a` or `b$`)."""
    alternatives = [_anchored_alternative(alt) for alt in _top_level_alternatives(pattern)]
    return f"^({'|'.join(alternatives)})$" if any(alternatives) else "^$"


def _anchored_alternative(pattern: str) -> str:
    starts = pattern.startswith("^")
    ends = pattern.endswith("$") and len(pattern) > int(starts)
    core = pattern[int(starts) : len(pattern) - int(ends)]
    if "^" in _outside_classes(core) or "$" in _outside_classes(core):
        raise PatternError("has an anchor inside it, which the grammar cannot hold")
    before = "" if starts else f"{JSON_STRING_CHAR}*"
    after = "" if ends else f"{JSON_STRING_CHAR}*"
    return f"{before}({core}){after}" if core else f"{before}{after}"


def _top_level_alternatives(pattern: str) -> list[str]:
    """The pattern split at each `|` outside groups and classes."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _outside_classes(pattern: str) -> str:
    """The pattern's unescaped characters outside its classes (the classes, once rewritten,
    hold only hex escapes and letters)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern[i] == "[":
            i = _class_end(pattern, i) + 1
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def _json_safe(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            text, i = _escape_outside(pattern, i)
            out.append(text)
        elif c == "[":
            end = _class_end(pattern, i)
            if end >= len(pattern):
                raise PatternError("opens a character class it does not close")
            out.append(_safe_class(pattern[i + 1 : end]))
            i = end + 1
        elif c == ".":
            out.append(JSON_STRING_CHAR)
            i += 1
        elif c == '"' or ord(c) < 0x20 or c == "\x7f":
            raise PatternError(_NEEDS_ESCAPE)
        else:
            out.append(c)
            i += 1
    return "".join(out)


_NEEDS_ESCAPE = (
    "matches a quote, a backslash or a control character, which a JSON string holds only "
    "escaped and the grammar cannot write"
)


def _escape_outside(pattern: str, i: int) -> tuple[str, int]:
    """An escape outside a class, as the converter and llama.cpp can read it."""
    if i + 1 >= len(pattern):
        raise PatternError("ends with a lone backslash")
    kind = pattern[i + 1]
    if kind in _CONVERTER_UNESCAPES:
        return pattern[i : i + 2], i + 2
    if kind in _SHORTHANDS or kind.lower() in _SHORTHANDS:
        return _safe_set(_SHORTHANDS[kind.lower()], negated=kind.isupper()), i + 2
    code, after = _escaped_code(pattern, i)
    if _excluded(code):
        raise PatternError(_NEEDS_ESCAPE)
    return f"[{_class_text(code)}]", after


def _escaped_code(text: str, i: int) -> tuple[int, int]:
    """The code point of the one-character escape at i, and where it ends."""
    kind = text[i + 1]
    width = _HEX_WIDTH.get(kind)
    if width is not None:
        digits = text[i + 2 : i + 2 + width]
        if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise PatternError(f"has a malformed \\{kind} escape")
        return int(digits, 16), i + 2 + width
    if kind in _CONTROL_ESCAPES:
        return _CONTROL_ESCAPES[kind], i + 2
    if kind.isalnum():
        raise PatternError(f"uses \\{kind}, which the grammar cannot hold")
    return ord(kind), i + 2


def _class_end(pattern: str, start: int) -> int:
    """The index of the `]` closing the class opened at start (a backslash escapes the next
    character, as the converter reads it); len(pattern) when it is not closed."""
    i = start + 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i


def _safe_class(body: str) -> str:
    negated = body.startswith("^")
    ranges = _class_ranges(body[1:] if negated else body)
    if not ranges:
        raise PatternError("has an empty character class")
    return _safe_set(ranges, negated=negated)


def _safe_set(ranges: Ranges, *, negated: bool) -> str:
    """A grammar class of the JSON-safe characters of a set (or of its complement)."""
    if negated:
        return f"[^{_class_body(ranges)}{_EXCLUDED_BODY}]"
    kept = [part for low, high in ranges for part in _outside_excluded(low, high)]
    if not kept:
        raise PatternError(_NEEDS_ESCAPE)
    return f"[{_class_body(kept)}]"


def _class_ranges(body: str) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in _SHORTHANDS:
            ranges += _SHORTHANDS[body[i + 1]]
            i += 2
            continue
        low, i = _class_char(body, i)
        if i + 1 < len(body) and body[i] == "-":
            high, i = _class_char(body, i + 1)
            if high < low:
                raise PatternError("has a character range whose end comes before its start")
            ranges.append((low, high))
        else:
            ranges.append((low, low))
    return ranges


def _class_char(body: str, i: int) -> tuple[int, int]:
    if body[i] != "\\":
        return ord(body[i]), i + 1
    if i + 1 >= len(body):
        raise PatternError("ends a character class with a lone backslash")
    if body[i + 1].lower() in _SHORTHANDS:  # \D, \W, \S inside a class
        raise PatternError(f"uses \\{body[i + 1]} inside a class, which the grammar cannot hold")
    return _escaped_code(body, i)


def _excluded(code: int) -> bool:
    return any(low <= code <= high for low, high in _EXCLUDED)


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
