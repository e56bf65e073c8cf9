"""Two small painted charts for the metrics panel: a sparkline and acceptance-by-position bars.

Painted with QPainter from the palette, so they follow light and dark themes and cost nothing
to redraw a few times a second (matplotlib would take tens of milliseconds per frame).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.metrics.summary import METRIC_DEFINITIONS
from ui.themes import readable

RATE_COLOR = QColor(52, 120, 246)
ACCEPT_COLOR = QColor(46, 160, 67)


def _muted(widget: QWidget) -> QColor:
    color = widget.palette().color(QPalette.ColorRole.WindowText)
    color.setAlpha(90)
    return color


def _small_font(widget: QWidget) -> QFont:
    """Scale labels: smaller than the panel's text, never below 7 pt, so they stay legible."""
    font = QFont(widget.font())
    font.setPointSizeF(max(7.0, font.pointSizeF() * 0.8))
    return font


class Sparkline(QWidget):
    """Tokens/s (blue, scaled to its peak) and acceptance (green, 0..100 %) over the reply.

    Its scale is written on it: the top line is the tokens/s peak (left, blue) and 100 %
    acceptance (right, green); the bottom line is zero for both.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rates: list[float | None] = []
        self._acceptance: list[float | None] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(round(QFontMetricsF(_small_font(self)).height()) + 48)

    def sizeHint(self) -> QSize:
        return QSize(200, self.minimumHeight() + 8)

    def set_series(self, rates: Sequence[float | None], acceptance: Sequence[float | None]) -> None:
        self._rates = list(rates)
        self._acceptance = list(acceptance)
        self.update()

    @property
    def point_count(self) -> int:
        return len(self._rates)

    @property
    def peak(self) -> float:
        return max((r for r in self._rates if r is not None), default=0.0)

    def scale_labels(self) -> list[tuple[str, QRectF]]:
        """The scale texts and where they are painted (the top band, left and right)."""
        metrics = QFontMetricsF(_small_font(self))
        band = QRectF(2, 0, self.width() - 4, metrics.height())
        peak = self.peak
        rate = f"{peak:.0f} tok/s peak" if peak > 0 else "tok/s"
        # A scale, not a reading: on an empty chart "100 % accepted" read as a result.
        accept = "top = 100 % acceptance"
        return [
            (rate, QRectF(band.left(), band.top(), metrics.horizontalAdvance(rate), band.height())),
            (
                accept,
                QRectF(
                    band.right() - metrics.horizontalAdvance(accept),
                    band.top(),
                    metrics.horizontalAdvance(accept),
                    band.height(),
                ),
            ),
        ]

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setFont(_small_font(self))
        labels = self.scale_labels()
        area = QRectF(self.rect()).adjusted(2, labels[0][1].bottom() + 2, -2, -3)
        painter.setPen(QPen(_muted(self), 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        painter.setPen(QPen(_muted(self), 1, Qt.PenStyle.DotLine))
        painter.drawLine(area.topLeft(), area.topRight())
        palette = self.palette()
        ink, paper = (
            palette.color(QPalette.ColorRole.WindowText),
            palette.color(QPalette.ColorRole.Window),
        )
        for (text, rect), color in zip(labels, (RATE_COLOR, ACCEPT_COLOR), strict=True):
            painter.setPen(readable(color, ink, paper))  # the series' hue, at AA contrast
            painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter, text)
        peak = self.peak
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


# Label every position, or every 2nd, 5th, ... where the bars are too narrow for every number.
_LABEL_STRIDES = (1, 2, 5, 10, 20, 50, 100)


class PositionBars(QWidget):
    """Acceptance rate per draft position 1..γ; an empty slot means "never drafted".

    A scale on the left (0 % at the base line, 100 % at the dotted top line) and the position
    under each bar.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: list[float | None] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(round(QFontMetricsF(_small_font(self)).height() * 2 + 44))

    def sizeHint(self) -> QSize:
        return QSize(200, self.minimumHeight() + 8)

    def set_values(self, values: Sequence[float | None]) -> None:
        self._values = list(values)
        tip = ", ".join(
            f"{i}: {'—' if v is None else f'{v:.0%}'}" for i, v in enumerate(self._values, 1)
        )
        title = f"Acceptance by draft position: {METRIC_DEFINITIONS['per_position_acceptance']}"
        self.setToolTip(f"{title}\n{tip}" if tip else f"{title}\n(nothing drafted yet)")
        self.update()

    @property
    def values(self) -> list[float | None]:
        return list(self._values)

    def plot_area(self) -> QRectF:
        """Where the bars go: right of the scale, above the position labels."""
        metrics = QFontMetricsF(_small_font(self))
        gutter = metrics.horizontalAdvance("100 %") + 6
        half = metrics.height() / 2
        return QRectF(self.rect()).adjusted(gutter, half + 1, -2, -metrics.height() - 3)

    def scale_labels(self) -> list[tuple[str, QRectF]]:
        """The scale texts and where they are painted: 100 % at the top line, 0 % at the base."""
        metrics = QFontMetricsF(_small_font(self))
        area = self.plot_area()
        h = metrics.height()
        width = area.left() - 4
        return [
            ("100 %", QRectF(0, area.top() - h / 2, width, h)),
            ("0 %", QRectF(0, area.bottom() - h / 2, width, h)),
        ]

    def position_labels(self) -> list[tuple[str, QRectF]]:
        """The positions named under the bars and where: every one while they fit, else the
        first and every 2nd, 5th, 10th, ... (a chat-history draft can run to dozens)."""
        n = len(self._values)
        if not n:
            return []
        metrics = QFontMetricsF(_small_font(self))
        area = self.plot_area()
        slot = area.width() / n
        needed = metrics.horizontalAdvance(str(n)) + 4
        fits = (s for s in _LABEL_STRIDES if s * slot >= needed or s >= n)
        stride = next(fits, _LABEL_STRIDES[-1])
        labels = []
        for i in range(n):
            if i == 0 or (i + 1) % stride == 0:
                text = str(i + 1)
                width = metrics.horizontalAdvance(text)
                # Centred on its bar, kept inside the widget at the right end.
                left = min(area.left() + (i + 0.5) * slot - width / 2, self.width() - width)
                labels.append((text, QRectF(left, area.bottom() + 2, width, metrics.height())))
        return labels

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setFont(_small_font(self))
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        area = self.plot_area()
        painter.setPen(QPen(_muted(self), 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        painter.setPen(QPen(_muted(self), 1, Qt.PenStyle.DotLine))
        painter.drawLine(area.topLeft(), area.topRight())
        painter.setPen(text_color)
        for text, rect in self.scale_labels():
            painter.drawText(
                rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text
            )
        n = len(self._values)
        if n:
            slot = area.width() / n
            for i, value in enumerate(self._values):
                x = area.left() + i * slot
                if value is not None:
                    h = max(1.0, value * area.height())
                    bar = QRectF(x + slot * 0.15, area.bottom() - h, slot * 0.7, h)
                    painter.fillRect(bar, ACCEPT_COLOR)
        painter.setPen(text_color)
        for text, rect in self.position_labels():
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.end()
