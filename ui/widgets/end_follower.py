"""Keeps a scrolling view at its end while text streams in, until the user scrolls away.

Then the view stays where the user is reading and a small button says there is new text
below; clicking it jumps down and follows again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QAbstractScrollArea, QToolButton

NEW_TEXT_LABEL = "↓ New text below"


class EndFollower(QObject):
    def __init__(self, area: QAbstractScrollArea) -> None:
        super().__init__(area)
        self._area = area
        self._following = True
        self._moving = 0  # >0 while the view itself moves the scroll bar
        self.button = QToolButton(area)
        self.button.setObjectName("newTextBelowButton")
        self.button.setText(NEW_TEXT_LABEL)
        self.button.setToolTip("Jump to the end of the reply and follow it again")
        self.button.hide()
        self.button.clicked.connect(self.follow)
        bar = area.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        area.installEventFilter(self)

    @property
    def following(self) -> bool:
        """True while the view keeps its end in sight."""
        return self._following

    def follow(self) -> None:
        """Jump to the end and follow new text again."""
        self._following = True
        self.button.hide()
        self.scroll_to_end()

    @contextmanager
    def editing(self) -> Iterator[None]:
        """Around a change of the text: replacing text shrinks the document for a moment and
        pulls the bar with it; afterwards the bar is where the user was reading, or at the end
        when following."""
        bar = self._area.verticalScrollBar()
        kept = bar.value()
        self._moving += 1
        try:
            yield
            bar.setValue(bar.maximum() if self._following else kept)
        finally:
            self._moving -= 1

    def new_text(self) -> None:
        """Text was added at the end: offer the jump when the user is reading elsewhere."""
        if not self._following:
            self._place_button()
            self.button.show()
            self.button.raise_()

    def scroll_to_end(self) -> None:
        bar = self._area.verticalScrollBar()
        self._moving += 1
        try:
            bar.setValue(bar.maximum())
        finally:
            self._moving -= 1

    def _at_end(self) -> bool:
        bar = self._area.verticalScrollBar()
        return bar.value() >= bar.maximum() - 4

    def _on_scrolled(self, _value: int) -> None:
        if self._moving:
            return
        # The user moved the view (wheel, bar, keys): follow only while they are at the end.
        self._following = self._at_end()
        if self._following:
            self.button.hide()

    def _on_range_changed(self, _minimum: int, _maximum: int) -> None:
        # A document grows as it is laid out, sometimes after the text went in: keep up.
        if self._following:
            self.scroll_to_end()

    def _place_button(self) -> None:
        self.button.adjustSize()
        area = self._area.viewport().geometry()
        self.button.move(
            area.right() - self.button.width() - 12, area.bottom() - self.button.height() - 8
        )

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._area and event.type() == QEvent.Type.Resize:
            self._place_button()
        return False
