"""A dismissable strip that shows one error sentence without blocking the window."""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QToolButton, QWidget

from ui.named_widgets import named_label


class ErrorBanner(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = named_label("errorLabel", wrap=True)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        # A screen reader would otherwise announce the glyph "✕".
        close.setAccessibleName("Dismiss")
        close.setObjectName("dismissErrorButton")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        self.hide()

    def show_message(self, text: str) -> None:
        self.label.setText(text)
        self.show()

    @property
    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()
