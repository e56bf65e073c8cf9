"""Reply rendering: Markdown, code blocks, and highlighted accepted draft tokens."""

from __future__ import annotations

import re

from ui.widgets.rendering import (
    code_blocks,
    mark_segments,
    render_plain,
    render_reply,
    with_code_links,
)

MARK = "background-color: #cfc;"


def spans(html: str) -> list[str]:
    return re.findall(r'<span style="background-color: #cfc;">(.*?)</span>', html, re.S)


def test_markdown_with_a_fenced_code_block_is_syntax_coloured() -> None:
    html = render_reply(
        [("Use this:\n\n```python\ndef f():\n    return 'hi'\n```\n", False)],
        highlight=True,
        mark_style=MARK,
    )
    assert html.startswith("<p>Use this:</p>")
    code = re.search(r"<pre[^>]*>.*?<code>(.*)</code></pre>", html, re.S)
    assert code is not None
    assert re.sub(r"<[^>]+>", "", code.group(1)) == "def f():\n    return 'hi'\n"
    # The keyword gets a colour of its own, inline (Qt's rich text has no stylesheet classes).
    assert re.search(r'<span style="color: #[0-9A-Fa-f]+; font-weight: bold">def</span>', html)
    dark = render_reply(
        [("```python\ndef f(): pass\n```\n", False)], highlight=False, mark_style=MARK, dark=True
    )
    assert dark != render_reply(
        [("```python\ndef f(): pass\n```\n", False)], highlight=False, mark_style=MARK
    )


def test_draft_shading_inside_code_survives_the_syntax_colours() -> None:
    segments = [("```python\ndef f(x):\n", False), ("    return x < 2\n", True), ("```\n", False)]
    html = render_reply(segments, highlight=True, mark_style=MARK)
    assert "".join(spans(html)) == "    return x &lt; 2"
    assert "\ue000" not in html and "border" not in html  # no marker reached the highlighter


def test_code_blocks_and_their_copy_links() -> None:
    text = "Intro\n```python\nprint(1)\n```\nmid\n~~~\nraw\n  two\n~~~\n"
    assert code_blocks(text) == ["print(1)\n", "raw\n  two\n"]
    html = with_code_links(render_reply([(text, False)], highlight=False, mark_style=MARK), "c:{}")
    assert html.count("Copy code") == 2
    assert html.index('href="c:0"') < html.index("mid") < html.index('href="c:1"')


def test_draft_runs_are_highlighted_and_plain_runs_are_not() -> None:
    html = render_reply(
        [("The ", False), ("quick brown", True), (" fox", False)], highlight=True, mark_style=MARK
    )
    assert spans(html) == ["quick brown"]
    assert "fox" in html


def test_highlight_off_renders_no_marks() -> None:
    html = render_reply([("a", False), ("b", True)], highlight=False, mark_style=MARK)
    assert "span" not in html and "\ue000" not in html and html == "<p>ab</p>"


def test_marks_never_hide_block_syntax() -> None:
    # A draft run that starts a heading, a list item or a code fence, possibly completed by a
    # later token: Markdown must still see the syntax.
    segments = [
        ("#", True),
        (" Title\n", True),
        ("- ", True),
        ("item\n\n", False),
        ("``", True),
        ("`python\n", False),
        ("x = 1\n", True),
        ("```\n", True),
    ]
    html = render_reply(segments, highlight=True, mark_style=MARK)
    assert "<h1>" in html and "<li>item</li>" in html
    assert "<pre" in html and "<code>" in html
    assert spans(html)[0] == "Title" and "".join(spans(html)[1:]) == "x = 1"
    assert "```" not in html


def test_marker_characters_never_reach_the_html() -> None:
    source = mark_segments([("a\nb", True), ("\n\n> quote", True)])
    assert source.count("\ue000") == source.count("\ue001") == 3
    html = render_reply([("a\nb", True), ("\n\n> quote", True)], highlight=True, mark_style=MARK)
    assert "\ue000" not in html and "\ue001" not in html
    assert "<blockquote>" in html


def test_raw_html_in_a_reply_is_shown_not_rendered() -> None:
    html = render_reply(
        [("<b>bold?</b> & <script>x</script>", False)], highlight=False, mark_style=MARK
    )
    assert "<b>" not in html and "<script>" not in html
    assert "&lt;b&gt;bold?&lt;/b&gt;" in html and "&amp;" in html


def test_single_newlines_are_kept() -> None:
    html = render_reply([("line one\nline two", False)], highlight=False, mark_style=MARK)
    assert html == "<p>line one<br />\nline two</p>"


def test_user_text_is_escaped_verbatim() -> None:
    assert render_plain("a <b>\n*c*") == "<p>a &lt;b&gt;<br>*c*</p>"
