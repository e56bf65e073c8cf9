"""Text as the conversation store keeps it: what shows as nothing dropped (so no blank title or
message), titles bounded, and what UTF-8 cannot hold made storable."""

from __future__ import annotations

import re
import unicodedata

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode categories that draw nothing: format (U+200B zero width space, bidi marks) and
# control characters; the white space among them (new lines, tabs) separates words instead.
# Lone surrogates (Cs) are kept: storable shows them as U+FFFD.
_INVISIBLE = frozenset({"Cf", "Cc"})
# Two format characters that do draw: they join (U+200D, emoji sequences such as a family) or
# keep apart (U+200C, Persian and Indic spellings) the characters on either side. Kept there,
# and only there: alone, or beside a space, they draw nothing.
_JOINERS = "\u200c\u200d"
_LOOSE_JOINERS = re.compile(f"(?<![^\\s{_JOINERS}])[{_JOINERS}]+|[{_JOINERS}]+(?![^\\s{_JOINERS}])")
# A title past this is cut: it is a row in a list and an export's file name.
MAX_TITLE = 200


def visible(text: str) -> str:
    """`text` without what shows as nothing (zero-width and other format characters, controls),
    its runs of white space made one space, trimmed. A message or a title with nothing visible
    is no message or title: the chat list would show a blank row."""
    kept = "".join(
        c for c in text if c.isspace() or c in _JOINERS or unicodedata.category(c) not in _INVISIBLE
    )
    return " ".join(_LOOSE_JOINERS.sub("", kept).split())


def title_text(text: str) -> str:
    title = visible(text)
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1].rstrip() + "…"
    return title or "Untitled"


def storable(text: str) -> str:
    """Text as UTF-8 can hold it: a lone surrogate (half an emoji from a program that cut one
    in two) becomes U+FFFD, as Qt shows it, rather than refusing the whole message."""
    return _LONE_SURROGATE.sub("\ufffd", text)
