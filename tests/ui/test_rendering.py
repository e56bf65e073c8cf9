"""Reply rendering: Markdown, code blocks, and highlighted accepted draft tokens."""

from __future__ import annotations

import re

from ui.widgets.rendering import mark_segments, render_plain, render_reply

MARK = "background-color: #cfc;"


def spans(html: str) -> list[str]:
    return re.findall(r'<span style="background-color: #cfc;">(.*?)</span>', html, re.S)


def test_markdown_with_a_fenced_code_block() -> None:
    html = render_reply(
        [("Use this:\n\n```python\nprint('hi')\n```\n", False)], highlight=True, mark_style=MARK
    )
    assert (
        html == "<p>Use this:</p>\n<pre><code class=\"language-python\">print('hi')\n</code></pre>"
    )


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
    assert '<pre><code class="language-python">' in html
    assert spans(html) == ["Title", "x = 1"]
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
