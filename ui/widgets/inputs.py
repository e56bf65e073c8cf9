"""Widgets that behave on a small screen: a dropdown and a label whose width never follows
their text (cut with "…", read whole in the tooltip), and a guard that keeps the mouse wheel
from changing settings by accident.

A wheel turned over a side panel is meant to scroll it; Qt's spin boxes and dropdowns take the
wheel whenever the pointer passes over them, so scrolling the Settings could change the
context size and reload the models. Guarded inputs take the wheel only once clicked into.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QWidget,
)

# Wide enough for "514.8 MiB · Q4_1 · SmolLM2…", narrow enough for two dropdowns in a row
# on a 1280-wide screen.
MIN_CONTENT_CHARS = 14


class ElidedComboBox(QComboBox):
    """A dropdown sized by MIN_CONTENT_CHARS and its layout, never by its entries: a long
    file name is cut with "…" in the box and read in full in the list and the tooltip."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(MIN_CONTENT_CHARS)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._base_tip = ""
        self.currentIndexChanged.connect(self._update_tip)

    def set_base_tooltip(self, text: str) -> None:
        """What the box is for; the current entry's full text is added under it."""
        self._base_tip = text
        self._update_tip()

    def setCurrentIndex(self, index: int) -> None:
        super().setCurrentIndex(index)
        # A caller that blocks signals while it selects (so that no one takes it for the
        # user's choice) blocks currentIndexChanged too, which would leave the tip on the
        # entry that was current before.
        self._update_tip()

    def shown_text(self) -> str:
        """The current entry as painted: elided to the text field's width."""
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox,
            option,
            QStyle.SubControl.SC_ComboBoxEditField,
            self,
        )
        return self.fontMetrics().elidedText(
            self.currentText(), Qt.TextElideMode.ElideRight, max(field.width() - 2, 0)
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        option.currentText = self.shown_text()
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)

    def _update_tip(self) -> None:
        current = self.currentText()
        self.setToolTip(f"{current}\n\n{self._base_tip}" if current else self._base_tip)


class ElidedLabel(QLabel):
    """One line of plain text that takes the room its row gives it and ends in "…" where the
    text needs more, instead of being cut mid-letter; text() is always all of it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def shown_text(self) -> str:
        """The text as painted: elided to the label's width."""
        return self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideRight, max(self.contentsRect().width(), 0)
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QStylePainter(self)
        align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(self.contentsRect(), int(align), self.shown_text())


class WheelGuard(QObject):
    """Event filter: a wheel over an unfocused spin box or dropdown scrolls the panel under
    it (or nothing, outside a scrolling panel) instead of changing the value."""

    def guard(self, root: QWidget) -> None:
        """Guard every spin box and dropdown under root (root included)."""
        inputs: list[QWidget] = [
            *root.findChildren(QAbstractSpinBox),
            *root.findChildren(QComboBox),
        ]
        if isinstance(root, QAbstractSpinBox | QComboBox):
            inputs.append(root)
        for widget in inputs:
            # Clicked or tabbed into, never focused by a passing wheel.
            widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget):
            return False
        if watched.hasFocus():
            return False
        area = _scroll_area_around(watched)
        if area is not None:
            QApplication.sendEvent(area.verticalScrollBar(), event)
        return True


def _scroll_area_around(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return parent
        parent = parent.parentWidget()
    return None
