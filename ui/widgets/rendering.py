"""Reply text to HTML: Markdown with code blocks, accepted draft tokens marked by who proposed
them (a draft model or the suffix index), each source with its own shade.

Highlighting works on the Markdown source: each run of draft-accepted text is wrapped in two
private-use characters (a pair per source), Markdown renders around them (they are ordinary
letters to it), and the HTML gets spans where they ended up. Runs are cut at line ends and
never start before a line's block syntax (`# `, `- `, `1. `, `> `, code fences), or they would
hide that syntax from Markdown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import markdown

from app.metrics.sources import SOURCE_COUNTS, SOURCE_WORDS
from app.metrics.summary import METRIC_DEFINITIONS
from app.store import Segment, TokenSource

# Unicode private-use code points: never produced by a tokenizer's text for normal replies and
# untouched by Markdown (which uses \x02/\x03 for its own placeholders). One pair per source.
_MARKERS = {TokenSource.DRAFT: ("\ue000", "\ue001"), TokenSource.SUFFIX: ("\ue002", "\ue003")}


def shade_tooltip(source: TokenSource) -> str:
    """What a shade means: its source in the stats line's words, and the metric definition of
    the count that source's tokens add to."""
    return f"Shaded, {SOURCE_WORDS[source]}: {METRIC_DEFINITIONS[SOURCE_COUNTS[source]]}"


def shading_legend() -> str:
    """Both shades' meanings, for the controls that switch shading on and off."""
    return "\n".join(shade_tooltip(source) for source in SOURCE_WORDS)


def shade_span(source: TokenSource, style: str, *, tooltip: bool = True) -> str:
    """The opening tag of a shaded run; Qt shows its title as the run's tooltip."""
    if not tooltip:
        return f'<span style="{style}">'
    return f'<span style="{style}" title="{html.escape(shade_tooltip(source))}">'


# Block syntax at the start of a line that a marker must not precede.
_BLOCK_PREFIX = re.compile(r"^(\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s?)*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")


def _make_markdown(code_style: str) -> markdown.Markdown:
    md = markdown.Markdown(
        extensions=["fenced_code", "codehilite", "tables", "sane_lists", "nl2br"],
        extension_configs={
            # Inline colours: Qt's rich text has no stylesheet classes for pygments' tokens.
            "codehilite": {"noclasses": True, "guess_lang": False, "pygments_style": code_style}
        },
    )
    # Model output is text, not markup: raw HTML in a reply is shown literally, never rendered.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md


# Syntax colours that read on a light and on a dark background.
CODE_STYLES = {"light": "default", "dark": "monokai"}
_MARKDOWN = {shade: _make_markdown(style) for shade, style in CODE_STYLES.items()}
_CODE_END = re.compile(r"</pre>(?:\s*</div>)?")
_FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a reply's Markdown, in order, without their fences."""
    return [match.group(2) for match in _FENCED.finditer(text)]


def with_code_links(body: str, link: str) -> str:
    """A "Copy code" link after each code block; `link` gets the block's index formatted in."""
    count = 0

    def add(match: re.Match[str]) -> str:
        nonlocal count
        anchor = f'<p style="margin:0"><a href="{link.format(count)}">Copy code</a></p>'
        count += 1
        return match.group(0) + anchor

    return _CODE_END.sub(add, body)


def mark_segments(segments: Sequence[Segment]) -> str:
    """Markdown source with drafted runs wrapped in marker characters (see module docstring)."""
    return _marked_source(segments)[0]


def _marked_source(segments: Sequence[Segment]) -> tuple[str, list[list[int]]]:
    """The marked Markdown source, and for each fenced code block the source of each of its
    characters: code is left unmarked, since a syntax highlighter would take the markers for
    code; its shading is put back into the highlighted HTML by _shade_code."""
    lines: list[list[tuple[str, int]]] = [[]]
    for text, source in segments:
        for ch in text:
            if ch == "\n":
                lines.append([])
            else:
                lines[-1].append((ch, int(source)))
    out: list[str] = []
    blocks: list[list[int]] = []
    fence: str | None = None
    for chars in lines:
        text = "".join(ch for ch, _ in chars)
        opener = _FENCE.match(text)
        if fence is None:
            out.append(_mark_line(chars))
            if opener:
                fence = opener.group(1)
                blocks.append([])
        elif opener and opener.group(1) == fence and text.strip() == fence:
            out.append(text)
            fence = None
        else:
            out.append(text)
            blocks[-1].extend([*(source for _, source in chars), TokenSource.TARGET])
    return "\n".join(out), blocks


_TEXT_UNIT = re.compile(r"&#?\w+;|.", re.S)
_CODE_BODY = re.compile(r"(<code[^>]*>)(.*?)(</code>)", re.S)


def _shade_code(body: str, blocks: list[list[int]], spans: dict[int, str]) -> str:
    """Wrap the drafted characters of each code block's text nodes in their source's span.

    Only text nodes are split, never tags, so the highlighter's spans stay well nested. A
    block whose text does not line up with its flags is left unshaded rather than misshaded.
    """
    found = iter(blocks)

    def shade(match: re.Match[str]) -> str:
        flags = next(found, None)
        if flags is None:
            return match.group(0)
        parts = re.split(r"(<[^>]+>)", match.group(2))
        units = [_TEXT_UNIT.findall(p) if i % 2 == 0 else [] for i, p in enumerate(parts)]
        if sum(len(u) for u in units) != len(flags):
            return match.group(0)
        position = 0
        out = []
        for i, part in enumerate(parts):
            if i % 2:
                out.append(part)
                continue
            run: list[str] = []
            inside = 0
            for unit in units[i]:
                flag = flags[position]
                position += 1
                if flag != inside:
                    run.append(("</span>" if inside else "") + spans.get(flag, ""))
                    inside = flag if flag in spans else 0
                run.append(unit)
            if inside:
                run.append("</span>")
            out.append("".join(run))
        return match.group(1) + "".join(out) + match.group(3)

    return _CODE_BODY.sub(shade, body)


def _mark_line(chars: list[tuple[str, int]]) -> str:
    # Decided on the whole line, because a later token can complete a fence or a heading mark.
    text = "".join(ch for ch, _ in chars)
    if _FENCE.match(text) or _TABLE_RULE.match(text):
        return text
    match = _BLOCK_PREFIX.match(text)
    prefix_len = len(match.group(1)) if match else 0
    out = [text[:prefix_len]]
    inside = 0
    for ch, source in chars[prefix_len:]:
        if source != inside:
            if inside:
                out.append(_MARKERS[TokenSource(inside)][1])
            inside = source if source in _MARKERS else 0
            if inside:
                out.append(_MARKERS[TokenSource(inside)][0])
        out.append(ch)
    if inside:
        out.append(_MARKERS[TokenSource(inside)][1])
    return "".join(out)


def render_reply(
    segments: Sequence[Segment],
    *,
    highlight: bool,
    mark_style: str,
    suffix_style: str | None = None,
    tooltips: bool = False,
    dark: bool = False,
) -> str:
    """HTML for one reply. `mark_style` is the CSS of a draft model's run and `suffix_style`
    that of a suffix index's run (the same shade when not given); `tooltips` gives each shaded
    run what its shade means; `dark` picks code colours for a dark background."""
    if highlight:
        source, blocks = _marked_source(segments)
    else:
        source, blocks = "".join(t for t, _ in segments), []
    md = _MARKDOWN["dark" if dark else "light"]
    md.reset()
    body = str(md.convert(source))
    if highlight:
        spans: dict[int, str] = {
            TokenSource.DRAFT: shade_span(TokenSource.DRAFT, mark_style, tooltip=tooltips),
            TokenSource.SUFFIX: shade_span(
                TokenSource.SUFFIX, suffix_style or mark_style, tooltip=tooltips
            ),
        }
        for kind, (opener, closer) in _MARKERS.items():
            body = body.replace(opener, spans[kind]).replace(closer, "</span>")
        body = _shade_code(body, blocks, spans)
    return body


def render_plain(text: str) -> str:
    """A user's message: shown as typed, line breaks kept, nothing interpreted."""
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"
