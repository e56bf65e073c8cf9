"""Sending a message adds it to the view without rendering the chat again, and shows exactly
what a whole rebuild would; finished replies are rendered once per look."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument
from pytestqt.qtbot import QtBot

from app.store import TokenSource
from ui.widgets import conversation_view
from ui.widgets.conversation_view import EDIT_HREF, ConversationView, ViewMessage

CODE = "Here:\n\n```python\nprint('hi')\n```\n\nDone."


def _chat() -> list[ViewMessage]:
    return [
        ViewMessage("user", "first <question>"),
        ViewMessage("assistant", CODE, [(CODE[:9], 0), (CODE[9:], TokenSource.DRAFT)], "stats 1"),
        ViewMessage("user", "second · question"),
        ViewMessage("assistant", "Cut short", None, "stats 2", note="stopped"),
    ]


def _anchors(document: QTextDocument) -> list[str]:
    hrefs = []
    block = document.begin()
    while block.isValid():
        fragments = block.begin()
        while not fragments.atEnd():
            href = fragments.fragment().charFormat().anchorHref()
            if href:
                hrefs.append(href)
            fragments += 1
        block = block.next()
    return hrefs


def _view(qtbot: QtBot, messages: list[ViewMessage]) -> ConversationView:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages(messages)
    return view


def test_a_sent_message_reads_as_a_rebuilt_view_with_one_edit_link(qtbot: QtBot) -> None:
    sent = ViewMessage("user", "third, with · a dot")
    appended = _view(qtbot, _chat())
    appended.append_message(sent)
    rebuilt = _view(qtbot, [*_chat(), sent])

    assert appended.toPlainText() == rebuilt.toPlainText()
    assert _anchors(appended.document()) == _anchors(rebuilt.document())
    assert _anchors(appended.document()).count(EDIT_HREF) == 1
    assert _anchors(appended.document())[-1] == EDIT_HREF  # under the message just sent
    assert [m.text for m in appended.messages] == [m.text for m in rebuilt.messages]


@pytest.mark.parametrize("first", [True, False])
def test_a_message_sent_to_an_empty_or_streaming_view_is_shown_whole(
    qtbot: QtBot, first: bool
) -> None:
    view = _view(qtbot, [] if first else _chat()[:1])
    if not first:
        view.begin_reply()
        view.append_token("partial", 0)
    sent = ViewMessage("user", "hello")
    view.append_message(sent)
    assert "Welcome" not in view.toPlainText()
    assert view.toPlainText().rstrip().endswith("hello\nCopy · Edit and resend")


def test_a_finished_reply_is_rendered_once_per_look(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    real = conversation_view.render_reply

    def counted(*args: object, **kwargs: bool) -> str:
        calls.append(bool(kwargs["highlight"]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(conversation_view, "render_reply", counted)
    view = _view(qtbot, _chat())
    assert len(calls) == 2
    view.set_messages(_chat())  # another chat and back, a message sent, an edit undone
    view.append_message(ViewMessage("user", "more"))
    assert len(calls) == 2
    view.set_highlight(False)  # another look: rendered again
    assert calls[2:] == [False, False]


def test_a_reply_linking_to_edit_itself_does_not_keep_the_old_edit_link(qtbot: QtBot) -> None:
    chat = [
        ViewMessage("user", "make a link"),
        ViewMessage("assistant", "Here: [x](edit:) done."),  # a link of the reply's own
    ]
    sent = ViewMessage("user", "again")
    appended = _view(qtbot, chat)
    appended.append_message(sent)
    rebuilt = _view(qtbot, [*chat, sent])
    assert _anchors(appended.document()) == _anchors(rebuilt.document())
    assert appended.toPlainText() == rebuilt.toPlainText()


def test_a_replys_own_links_to_the_views_schemes_do_nothing(qtbot: QtBot) -> None:
    reply = "See [this](copy:0), [that](EDIT:), [one](example:1) and [site](https://example.org)."
    view = _view(qtbot, [ViewMessage("user", "links?"), ViewMessage("assistant", reply)])
    hrefs = _anchors(view.document())
    own = ["copy:0", EDIT_HREF, "copy:1"]  # the view's: Copy, Edit and resend, Copy
    assert [h for h in hrefs if not h.startswith(("inert:", "https:"))] == own
    assert "inert:copy:0" in hrefs and "inert:EDIT:" in hrefs and "inert:example:1" in hrefs
    copied: list[str] = []
    view.copied.connect(copied.append)
    for href in hrefs:
        if href.startswith("inert:"):
            view.anchorClicked.emit(QUrl(href))
    assert copied == []  # nothing the reply wrote acts as the view's own link
