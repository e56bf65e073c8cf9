"""Reply text to HTML: Markdown with code blocks, accepted draft tokens marked.

Highlighting works on the Markdown source: each run of draft-accepted text is wrapped in two
private-use characters, Markdown renders around them (they are ordinary letters to it), and the
HTML gets spans where they ended up. Runs are cut at line ends and never start before a line's
block syntax (`# `, `- `, `1. `, `> `, code fences), or they would hide that syntax from Markdown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import markdown

Segment = tuple[str, bool]

# Unicode private-use code points: never produced by a tokenizer's text for normal replies and
# untouched by Markdown (which uses \x02/\x03 for its own placeholders).
_OPEN = "\ue000"
_CLOSE = "\ue001"

# Block syntax at the start of a line that a marker must not precede.
_BLOCK_PREFIX = re.compile(r"^(\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s?)*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")


def _make_markdown() -> markdown.Markdown:
    md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists", "nl2br"])
    # Model output is text, not markup: raw HTML in a reply is shown literally, never rendered.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md


_MD = _make_markdown()


def mark_segments(segments: Sequence[Segment]) -> str:
    """Markdown source with draft runs wrapped in marker characters (see module docstring)."""
    lines: list[list[tuple[str, bool]]] = [[]]
    for text, from_draft in segments:
        for ch in text:
            if ch == "\n":
                lines.append([])
            else:
                lines[-1].append((ch, from_draft))
    return "\n".join(_mark_line(line) for line in lines)


def _mark_line(chars: list[tuple[str, bool]]) -> str:
    # Decided on the whole line, because a later token can complete a fence or a heading mark.
    text = "".join(ch for ch, _ in chars)
    if _FENCE.match(text) or _TABLE_RULE.match(text):
        return text
    match = _BLOCK_PREFIX.match(text)
    prefix_len = len(match.group(1)) if match else 0
    out = [text[:prefix_len]]
    inside = False
    for ch, from_draft in chars[prefix_len:]:
        if from_draft != inside:
            out.append(_OPEN if from_draft else _CLOSE)
            inside = from_draft
        out.append(ch)
    if inside:
        out.append(_CLOSE)
    return "".join(out)


def render_reply(segments: Sequence[Segment], *, highlight: bool, mark_style: str) -> str:
    """HTML for one reply. `mark_style` is the CSS of a highlighted run."""
    source = mark_segments(segments) if highlight else "".join(t for t, _ in segments)
    _MD.reset()
    body = str(_MD.convert(source))
    if highlight:
        body = body.replace(_OPEN, f'<span style="{mark_style}">').replace(_CLOSE, "</span>")
    return body


def render_plain(text: str) -> str:
    """A user's message: shown as typed, line breaks kept, nothing interpreted."""
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def render_markdown(text: str) -> str:
    _MD.reset()
    return str(_MD.convert(text))
