"""Two small painted charts for the metrics panel: a sparkline and acceptance-by-position bars.

Painted with QPainter from the palette, so they follow light and dark themes and cost nothing
to redraw a few times a second (matplotlib would take tens of milliseconds per frame).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

RATE_COLOR = QColor(52, 120, 246)
ACCEPT_COLOR = QColor(46, 160, 67)


def _muted(widget: QWidget) -> QColor:
    color = widget.palette().color(QPalette.ColorRole.WindowText)
    color.setAlpha(90)
    return color


class Sparkline(QWidget):
    """Tokens/s (blue, scaled to its peak) and acceptance (green, 0..100 %) over the reply."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rates: list[float | None] = []
        self._acceptance: list[float | None] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(48)

    def sizeHint(self) -> QSize:
        return QSize(200, 56)

    def set_series(self, rates: Sequence[float | None], acceptance: Sequence[float | None]) -> None:
        self._rates = list(rates)
        self._acceptance = list(acceptance)
        self.update()

    @property
    def point_count(self) -> int:
        return len(self._rates)

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        area = QRectF(self.rect()).adjusted(2, 4, -2, -4)
        painter.setPen(QPen(_muted(self), 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        peak = max((r for r in self._rates if r is not None), default=0.0)
        if peak > 0:
            self._draw(
                painter, area, [None if r is None else r / peak for r in self._rates], RATE_COLOR
            )
        self._draw(painter, area, self._acceptance, ACCEPT_COLOR)
        painter.end()

    @staticmethod
    def _draw(
        painter: QPainter, area: QRectF, values: Sequence[float | None], color: QColor
    ) -> None:
        if len(values) < 2:
            return
        step = area.width() / (len(values) - 1)
        path = QPainterPath()
        pen_down = False
        for i, value in enumerate(values):
            if value is None:
                pen_down = False
                continue
            point = QPointF(area.left() + i * step, area.bottom() - value * area.height())
            if pen_down:
                path.lineTo(point)
            else:
                path.moveTo(point)
                pen_down = True
        painter.setPen(QPen(color, 1.6))
        painter.drawPath(path)


class PositionBars(QWidget):
    """Acceptance rate per draft position 1..γ; an empty slot means "never drafted"."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: list[float | None] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(56)

    def sizeHint(self) -> QSize:
        return QSize(200, 64)

    def set_values(self, values: Sequence[float | None]) -> None:
        self._values = list(values)
        tip = ", ".join(
            f"{i}: {'—' if v is None else f'{v:.0%}'}" for i, v in enumerate(self._values, 1)
        )
        self.setToolTip(
            "Acceptance by draft position: rounds that accepted position i / rounds that "
            f"drafted it.\n{tip}"
            if tip
            else "Acceptance by draft position (nothing drafted yet)"
        )
        self.update()

    @property
    def values(self) -> list[float | None]:
        return list(self._values)

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        label_h = 12
        area = QRectF(self.rect()).adjusted(2, 2, -2, -label_h - 2)
        painter.setPen(QPen(_muted(self), 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        n = len(self._values)
        if n:
            slot = area.width() / n
            font = painter.font()
            font.setPointSizeF(max(6.0, font.pointSizeF() * 0.75))
            painter.setFont(font)
            for i, value in enumerate(self._values):
                x = area.left() + i * slot
                if value is not None:
                    h = max(1.0, value * area.height())
                    bar = QRectF(x + slot * 0.15, area.bottom() - h, slot * 0.7, h)
                    painter.fillRect(bar, ACCEPT_COLOR)
                painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
                painter.drawText(
                    QRectF(x, area.bottom() + 1, slot, label_h),
                    Qt.AlignmentFlag.AlignCenter,
                    str(i + 1),
                )
        painter.end()
