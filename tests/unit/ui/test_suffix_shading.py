"""Accepted tokens shaded by who proposed them: a draft model in one shade, the suffix index
(this chat's and past chats' text) in another, each explained where it is shown."""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QPalette, QTextCursor
from pytestqt.qtbot import QtBot

from app.metrics.sources import accepted_by_source
from app.metrics.summary import METRIC_DEFINITIONS
from app.store import TokenSource
from ui.formatting import stats_line
from ui.widgets.conversation_view import ConversationView, ViewMessage
from ui.widgets.rendering import render_reply

DRAFT_CSS = "background-color: #cfc;"
SUFFIX_CSS = "background-color: #fdb;"
REPLY = [
    ("Here is ", TokenSource.TARGET),
    ("the draft part", TokenSource.DRAFT),
    (" and ", TokenSource.TARGET),
    ("the chat own words", TokenSource.SUFFIX),
    (".\n\n```python\n", TokenSource.TARGET),
    ("x = 1", TokenSource.SUFFIX),
    ("\ny = 2", TokenSource.DRAFT),
    ("\n```\n", TokenSource.TARGET),
]


def _shaded(html: str, css: str) -> list[str]:
    return re.findall(rf'<span style="{css}"[^>]*>(.*?)</span>', html, re.S)


def test_each_source_gets_its_own_shade_in_prose_and_in_code() -> None:
    html = render_reply(REPLY, highlight=True, mark_style=DRAFT_CSS, suffix_style=SUFFIX_CSS)
    assert _shaded(html, DRAFT_CSS)[0] == "the draft part"
    assert _shaded(html, SUFFIX_CSS)[0] == "the chat own words"
    assert "own words" not in "".join(_shaded(html, DRAFT_CSS))
    assert "draft" not in "".join(_shaded(html, SUFFIX_CSS))
    code = html[html.index("<pre") :]
    assert "1" in "".join(_shaded(code, SUFFIX_CSS))  # x = 1 came from the suffix index
    assert "2" in "".join(_shaded(code, DRAFT_CSS))  # y = 2 from the draft model
    assert "\ue000" not in html and "\ue002" not in html  # no marker left behind


def test_without_highlighting_no_source_is_shaded() -> None:
    html = render_reply(REPLY, highlight=False, mark_style=DRAFT_CSS, suffix_style=SUFFIX_CSS)
    assert '<span style="background' not in html


def test_a_shaded_run_explains_itself_with_the_metric_definition(qtbot: QtBot) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("user", "again?"), ViewMessage("assistant", "", REPLY[:4])])
    tips = {
        "draft part": METRIC_DEFINITIONS["model_accepted"],
        "own words": METRIC_DEFINITIONS["suffix_accepted"],
    }
    text = view.toPlainText()
    for words, definition in tips.items():
        cursor = QTextCursor(view.document())
        cursor.setPosition(text.index(words) + 2)
        assert definition in cursor.charFormat().toolTip()
    cursor = QTextCursor(view.document())
    cursor.setPosition(text.index("Here is") + 2)
    assert cursor.charFormat().toolTip() == ""  # the target's own text is not shaded
    # The legend under the reply names both shades, each in its own colour.
    assert "Shaded: draft model · chat history" in text


def _background_at(view: ConversationView, words: str) -> str:
    cursor = QTextCursor(view.document())
    cursor.setPosition(view.toPlainText().index(words) + 2)
    return cursor.charFormat().background().color().name()


def _contrast(a: QColor, b: QColor) -> float:
    def luminance(c: QColor) -> float:
        channels = [v / 255 for v in (c.red(), c.green(), c.blue())]
        lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in channels]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_both_shades_read_in_a_light_and_a_dark_palette(qtbot: QtBot) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("assistant", "", REPLY[:4])])
    palettes = {"light": (QColor(255, 255, 255), QColor(20, 20, 20))}
    palettes["dark"] = (QColor(25, 25, 28), QColor(230, 230, 230))
    seen = set()
    for base, text in palettes.values():
        palette = QPalette(view.palette())
        palette.setColor(QPalette.ColorRole.Base, base)
        palette.setColor(QPalette.ColorRole.Text, text)
        view.setPalette(palette)
        draft = QColor(_background_at(view, "draft part"))
        suffix = QColor(_background_at(view, "own words"))
        assert draft.name() in view.mark_style and suffix.name() in view.suffix_style
        # Told apart from each other and from the page, and the text stays readable (WCAG AA).
        assert draft != suffix and base not in (draft, suffix)
        assert abs(draft.hueF() - suffix.hueF()) > 0.1
        for shade in (draft, suffix):
            assert _contrast(shade, text) >= 4.5, (shade.name(), text.name())
        seen.add((draft.name(), suffix.name()))
    assert len(seen) == 2  # the shades follow the palette


def test_streamed_tokens_keep_their_source_to_the_finished_message(qtbot: QtBot) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("user", "hi")])
    view.begin_reply()
    for text, source in [("a", 0), ("b", 2), ("c", 2), ("d", 1), ("e", True)]:
        view.append_token(text, source)
    message = view.finish_reply("abcde", "mode hybrid")
    assert message is not None
    assert message.segments == [
        ("a", TokenSource.TARGET),
        ("bc", TokenSource.SUFFIX),
        ("de", TokenSource.DRAFT),
    ]


def test_the_stats_line_counts_accepted_tokens_by_source() -> None:
    hybrid = {"mode": "hybrid", "acceptance_rate": 0.5, "model_accepted": 30}
    hybrid["suffix_accepted"] = 12
    assert "accepted 30 draft model + 12 chat history" in stats_line(hybrid)
    # The hybrid names both sources even when one kept nothing this reply.
    assert accepted_by_source({**hybrid, "suffix_accepted": 0}).endswith("+ 0 chat history")
    suffix_only = {"mode": "suffix", "suffix_accepted": 9, "model_accepted": 0}
    assert accepted_by_source(suffix_only) == "accepted 9 chat history"
    # Replies stored before the counts were kept say nothing rather than a wrong 0.
    assert "accepted" not in stats_line({"mode": "draft", "acceptance_rate": 0.7})
    assert "accepted" not in stats_line({"mode": "plain", "suffix_accepted": 0})
