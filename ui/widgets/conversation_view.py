"""The conversation as one read-only rich-text document.

Finished messages are rendered once. The reply being streamed is re-rendered (Markdown needs
the whole text: a code fence changes the meaning of what came before it) at most every
RENDER_INTERVAL_MS, and only its own part of the document is replaced, so a long conversation
costs no more per token than a short one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape

from PySide6.QtCore import QEvent, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QTextCursor
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.metrics.sources import SOURCE_WORDS
from app.store import Segment, TokenSource
from ui.themes import mix, muted
from ui.widgets.document_links import last_link
from ui.widgets.end_follower import EndFollower
from ui.widgets.html_cache import HtmlCache
from ui.widgets.rendering import (
    code_blocks,
    render_plain,
    render_reply,
    shade_span,
    with_code_links,
)
from ui.widgets.welcome_page import EXAMPLE_PROMPTS, welcome_html

RENDER_INTERVAL_MS = 40
EDIT_HREF = "edit:"
# The schemes of the view's own links (_on_anchor).
_VIEW_SCHEMES = re.compile(r'href="(?=(?:copy|copycode|edit|example):)', re.IGNORECASE)
LINK_SEPARATOR = " · "


@dataclass
class ViewMessage:
    role: str  # "user" or "assistant"
    text: str
    segments: list[Segment] | None = None  # reply runs with their TokenSource
    stats_line: str = ""
    note: str = ""  # e.g. an error that ended the reply


@dataclass
class _Streaming:
    message: ViewMessage
    start: int  # document position where the reply (its header first) begins
    dirty: bool = False
    chunks: list[Segment] = field(default_factory=list)
    waiting: str = "…"  # shown until the first text arrives


class ConversationView(QTextBrowser):
    """Signals:
    examplePicked(str): the user clicked an example prompt on the welcome page.
    editRequested(): "Edit and resend" under the last message the user wrote.
    copied(str): what a Copy link put on the clipboard.
    """

    examplePicked = Signal(str)
    editRequested = Signal()
    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationView")
        self.setOpenExternalLinks(False)
        self.setOpenLinks(False)
        self.setAccessibleName("Conversation")
        self.anchorClicked.connect(self._on_anchor)
        self._messages: list[ViewMessage] = []
        self._streaming: _Streaming | None = None
        self._highlight = True
        self._finished = HtmlCache()
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self._flush)
        self.follower = EndFollower(self)
        self._apply_palette()
        self.rebuild()  # the welcome page until there is a conversation

    # -- theme --------------------------------------------------------------------------------

    def _apply_palette(self) -> None:
        palette = self.palette()
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        # Green for a draft model's tokens, amber for the suffix index's: told apart by hue and
        # by lightness, and light enough under dark text, dark enough under light text. Kept
        # pale on purpose: a shade strong enough for 3:1 against the page leaves the syntax
        # colours of code on it (pygments') well under 4.5:1.
        self._mark_color = mix(base, QColor(46, 160, 67), 0.28).name()
        self._suffix_color = mix(base, QColor(235, 150, 20), 0.38).name()
        code_bg = mix(base, text, 0.07).name()
        self._muted = muted(text, base).name()
        self._text_color = text.name()
        self._dark = base.lightness() < 128
        self._user_color = mix(text, QColor(52, 120, 246), 0.7).name()
        self._bot_color = mix(text, QColor(46, 160, 67), 0.7).name()
        self.document().setDefaultStyleSheet(
            f"pre {{ background-color: {code_bg}; font-family: monospace; }}"
            f"code {{ background-color: {code_bg}; font-family: monospace; }}"
            "h1, h2, h3 { margin-top: 6px; }"
        )

    @property
    def mark_style(self) -> str:
        """The CSS of a draft model's accepted run."""
        return f"background-color: {self._mark_color};"

    @property
    def suffix_style(self) -> str:
        """The CSS of the suffix index's accepted run."""
        return f"background-color: {self._suffix_color};"

    def _shade(self, source: TokenSource, text: str) -> str:
        """`text` in `source`'s shade, in the page's text colour (a legend's line is muted)."""
        style = self.suffix_style if source == TokenSource.SUFFIX else self.mark_style
        style += f" color: {self._text_color};"
        return shade_span(source, style) + _text(text) + "</span>"

    def _legend(self, segments: list[Segment] | None) -> str:
        """What each shade under a reply means, for the sources the reply holds."""
        if not self._highlight or not segments:
            return ""
        present = {int(source) for text, source in segments if text}
        shades = [self._shade(s, words) for s, words in SOURCE_WORDS.items() if s in present]
        if not shades:
            return ""
        return f'<p style="color:{self._muted}; font-size:small">Shaded: {" · ".join(shades)}</p>'

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
            self.rebuild()

    # -- whole conversation -------------------------------------------------------------------

    def set_highlight(self, on: bool) -> None:
        if on != self._highlight:
            self._highlight = on
            self.rebuild()

    def set_messages(self, messages: list[ViewMessage]) -> None:
        self._render_timer.stop()
        self._streaming = None
        self._messages = list(messages)
        self.rebuild()
        self.follower.follow()  # another conversation opens at its end

    def append_message(self, message: ViewMessage) -> None:
        """Add a message sent after the last one shown, without rendering the others again
        (every send rebuilt the view, the last message's Edit link moving: 0.4-0.8 s a send in
        a 300-message chat)."""
        if self._streaming is not None or not self._messages:
            self.set_messages([*self._messages, message])
            return
        if message.role == "user":
            self._drop_edit_link()  # it belongs to the last message of yours only
        self._messages.append(message)
        self._append(message, len(self._messages) - 1)
        self.follower.follow()
        self.follower.scroll_to_end()

    def _drop_edit_link(self) -> None:
        """Remove "Edit and resend" (and its separator) from the message now last of yours."""
        cursor = last_link(self.document(), EDIT_HREF, LINK_SEPARATOR)
        if cursor is not None:
            with self.follower.editing():
                cursor.removeSelectedText()

    @property
    def messages(self) -> list[ViewMessage]:
        return list(self._messages)

    def rebuild(self) -> None:
        streaming = self._streaming
        finished = [m for m in self._messages if streaming is None or m is not streaming.message]
        self.clear()
        if not self._messages:
            self.setHtml(self._welcome())
            return
        for index, message in enumerate(finished):
            self._append(message, index)
        if streaming is not None:
            self._begin(streaming.message, streaming.chunks)
        if self.follower.following:
            self.follower.scroll_to_end()

    def _append(self, message: ViewMessage, index: int) -> None:
        # One insertHtml per message: separate calls would merge a message's first paragraph
        # into the previous block.
        cursor = self._new_block()
        cursor.insertHtml(
            self._header(message.role) + self._body(message, index) + self._footer(message, index)
        )

    def _welcome(self) -> str:
        return welcome_html(self._shade, self._muted)

    def _new_block(self) -> QTextCursor:
        cursor = self._end_cursor()
        if not self.document().isEmpty():
            cursor.insertBlock()
        return cursor

    def _header(self, role: str) -> str:
        who, color = ("You", self._user_color) if role == "user" else ("Assistant", self._bot_color)
        return f'<p style="margin-top:12px; color:{color}"><b>{who}</b></p>'

    def _body(self, message: ViewMessage, index: int | None = None) -> str:
        """index None: the reply being streamed, which gets no Copy links yet."""
        if message.role == "user":
            return render_plain(message.text)
        segments = message.segments or [(message.text, False)]
        if index is None:
            return self._render(segments)
        return with_code_links(self._finished_html(segments), f"copycode:{index}:{{}}")

    def _finished_html(self, segments: list[Segment]) -> str:
        look = (self._highlight, self._dark, self.mark_style, self.suffix_style)
        return self._finished.get((tuple(segments), *look), lambda: self._render(segments))

    def _render(self, segments: list[Segment]) -> str:
        html = render_reply(
            segments,
            highlight=self._highlight,
            mark_style=self.mark_style,
            suffix_style=self.suffix_style,
            tooltips=True,
            dark=self._dark,
        )
        # A reply's own Markdown link to one of the view's schemes ("[x](edit:)") would act
        # as the view's link: it is made a link to nothing the view does.
        return _VIEW_SCHEMES.sub('href="inert:', html)

    def _footer(self, message: ViewMessage, index: int | None = None) -> str:
        parts = []
        if index is not None:
            links = [f'<a href="copy:{index}">Copy</a>']
            if message.role == "user" and index == self._last_user_index():
                links.append(f'<a href="{EDIT_HREF}">Edit and resend</a>')
            parts.append(
                f'<p style="color:{self._muted}; font-size:small">{LINK_SEPARATOR.join(links)}</p>'
            )
        if message.note:
            parts.append(f'<p style="color:{self._muted}"><i>{_text(message.note)}</i></p>')
        if message.stats_line:
            parts.append(
                f'<p style="color:{self._muted}; font-size:small">{_text(message.stats_line)}</p>'
            )
        if message.role == "assistant":
            parts.append(self._legend(message.segments))
        return "".join(parts)

    # -- the streaming reply ------------------------------------------------------------------

    def begin_reply(self) -> None:
        message = ViewMessage("assistant", "", segments=[])
        if not self._messages:
            self.clear()  # the welcome page
        self._messages.append(message)
        # The reply to a message just sent is read as it comes: follow it.
        self.follower.follow()
        self._begin(message, [])

    def _begin(self, message: ViewMessage, chunks: list[Segment]) -> None:
        # The reply is re-inserted with its header, in one insertHtml, as finished messages
        # are: inserting a body on its own into an empty block would merge the body's first
        # block (say, a code block's first line) into that plain paragraph.
        start = self._new_block().position()
        self._streaming = _Streaming(message, start, chunks=list(chunks))
        self._render_streaming()

    def show_waiting(self, text: str) -> None:
        """What the reply shows until its first text (how far a long prompt has been read)."""
        streaming = self._streaming
        if streaming is None or streaming.chunks or streaming.waiting == text:
            return
        streaming.waiting = text
        self._render_streaming()

    def append_token(self, text: str, source: int) -> None:
        """source: a TokenSource (a bool reads as the draft model's run or the target's)."""
        streaming = self._streaming
        if streaming is None or not text:
            return
        chunks = streaming.chunks
        source = TokenSource.stored(source)
        if chunks and chunks[-1][1] == source:
            chunks[-1] = (chunks[-1][0] + text, source)
        else:
            chunks.append((text, source))
        streaming.dirty = True
        if not self._render_timer.isActive():
            self._render_timer.start()

    def finish_reply(self, text: str, stats_line: str, note: str = "") -> ViewMessage | None:
        """Render the final reply with its stats line; returns the finished message."""
        streaming = self._streaming
        if streaming is None:
            return None
        self._render_timer.stop()
        message = streaming.message
        message.segments = list(streaming.chunks)
        message.text = text or "".join(t for t, _ in streaming.chunks)
        message.stats_line = stats_line
        message.note = note
        index = next(i for i, m in enumerate(self._messages) if m is message)
        self._replace_from(
            streaming.start,
            self._header(message.role) + self._body(message, index) + self._footer(message, index),
        )
        self._streaming = None
        return message

    def drop_last_reply(self) -> ViewMessage | None:
        """Take the last reply out of the view; returns it (None when the last is no reply)."""
        if not self._messages or self._messages[-1].role != "assistant":
            return None
        dropped = self._messages.pop()
        self.rebuild()
        return dropped

    @property
    def streaming_text(self) -> str:
        return "".join(t for t, _ in self._streaming.chunks) if self._streaming else ""

    def _flush(self) -> None:
        if self._streaming is not None and self._streaming.dirty:
            self._render_streaming()

    def _render_streaming(self) -> None:
        streaming = self._streaming
        assert streaming is not None
        streaming.dirty = False
        segments = streaming.chunks or [(streaming.waiting, False)]
        html = self._render(segments)
        self._replace_from(streaming.start, self._header("assistant") + html)
        if streaming.chunks:
            self.follower.new_text()

    def _replace_from(self, start: int, html: str) -> None:
        with self.follower.editing():
            cursor = QTextCursor(self.document())
            cursor.setPosition(start)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.beginEditBlock()
            cursor.removeSelectedText()
            cursor.insertHtml(html)
            cursor.endEditBlock()

    # -- links in the conversation -------------------------------------------------------------

    def _last_user_index(self) -> int | None:
        users = [i for i, m in enumerate(self._messages) if m.role == "user"]
        return users[-1] if users else None

    def _on_anchor(self, url: QUrl) -> None:
        kind, _, rest = url.toString().partition(":")
        if kind == "example" and rest.isdigit() and int(rest) < len(EXAMPLE_PROMPTS):
            self.examplePicked.emit(EXAMPLE_PROMPTS[int(rest)])
        elif url.toString() == EDIT_HREF:
            self.editRequested.emit()
        elif kind == "copy" and rest.isdigit() and int(rest) < len(self._messages):
            self.copy_text(self._messages[int(rest)].text)
        elif kind == "copycode":
            message, _, block = rest.partition(":")
            if message.isdigit() and block.isdigit() and int(message) < len(self._messages):
                blocks = code_blocks(self._messages[int(message)].text)
                if int(block) < len(blocks):
                    self.copy_text(blocks[int(block)])

    def copy_text(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text)

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor


def _text(text: str) -> str:
    """Plain text as HTML: markup characters shown, never interpreted."""
    return escape(text, quote=False)
