"""The message box: Enter sends, Shift+Enter starts a new line."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget


class PromptInput(QPlainTextEdit):
    """Signals:
    submitted(): Enter was pressed without Shift (the window decides whether it can send).
    """

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptInput")
        self.setPlaceholderText("Message (Enter to send, Shift+Enter for a new line)")
        self.setAccessibleName("Message")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(120)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        is_enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if is_enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            event.accept()
            self.submitted.emit()
            return
        if is_enter:
            # Shift+Enter: a plain newline, not the paragraph separator Qt would insert.
            self.insertPlainText("\n")
            event.accept()
            return
        super().keyPressEvent(event)
