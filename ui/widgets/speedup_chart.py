"""The Insight panel's speedup-vs-γ chart: the curve the cost model predicts from the measured
per-position acceptance and costs, the speedups actually measured at the γ values that ran
(dots), the current and the best γ, and the break-even line (speedup 1 = plain decoding).

Painted with QPainter: a redraw a few times a second must cost well under a millisecond.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.metrics.cost_model import MAX_GAMMA
from app.metrics.insight import Insight

CURVE_COLOR = QColor(52, 120, 246)
MEASURED_COLOR = QColor(46, 160, 67)
BEST_COLOR = QColor(230, 140, 20)


class SpeedupChart(QWidget):
    """Predicted speedup for γ = 0..max (line), measured speedups (dots), current and best γ."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.curve: tuple[float, ...] = ()
        self.measured: dict[int, float] = {}
        self.current_gamma: int | None = None
        self.best_gamma: int | None = None
        self.message = "no speculative rounds yet"
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumHeight(150)

    def sizeHint(self) -> QSize:
        return QSize(320, 200)

    def set_data(self, insight: Insight) -> None:
        self.curve = insight.curve
        self.measured = dict(insight.measured)
        self.current_gamma = insight.current_gamma
        self.best_gamma = insight.best_gamma
        if not insight.spec_rounds:
            self.message = "no speculative rounds yet"
        elif not insight.curve:
            self.message = "needs a plain step and one more γ to price verification"
        else:
            self.message = ""
        self.setToolTip(self._describe())
        self.update()

    def _describe(self) -> str:
        lines = [
            "Speedup over plain decoding by draft length γ.",
            "Line: the cost model fed by this reply's per-position acceptance and "
            "measured costs. Dots: speedup measured at each γ that ran. Dashed: break-even.",
        ]
        if self.best_gamma is not None and self.curve:
            lines.append(f"Best γ {self.best_gamma}: {self.curve[self.best_gamma]:.2f}×.")
        return "\n".join(lines)

    def _y_top(self) -> float:
        values = [*self.curve, *self.measured.values(), 1.0]
        return max(1.25, max(values) * 1.12)

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        muted = QColor(text_color)
        muted.setAlpha(110)
        metrics = painter.fontMetrics()
        left = metrics.horizontalAdvance("0.00×") + 8
        area = QRectF(self.rect()).adjusted(left, 8, -10, -metrics.height() - 8)
        n_gamma = max(len(self.curve) - 1, max(self.measured, default=0), MAX_GAMMA)
        top = self._y_top()

        def point(gamma: float, speedup: float) -> QPointF:
            x = area.left() + area.width() * gamma / n_gamma
            y = area.bottom() - area.height() * speedup / top
            return QPointF(x, y)

        # Axes with a few ticks.
        painter.setPen(QPen(muted, 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        painter.drawLine(area.bottomLeft(), area.topLeft())
        step = max(1, n_gamma // 8)
        for gamma in range(0, n_gamma + 1, step):
            p = point(gamma, 0.0)
            painter.drawText(
                QRectF(p.x() - 15, area.bottom() + 2, 30, metrics.height()),
                Qt.AlignmentFlag.AlignCenter,
                str(gamma),
            )
        for value in (0.0, 1.0, top / 1.12):
            p = point(0, value)
            painter.drawText(
                QRectF(0, p.y() - metrics.height() / 2, left - 4, metrics.height()),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                f"{value:.2f}×",
            )

        # Break-even: below this line speculation loses to plain decoding.
        pen = QPen(text_color, 1, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.drawLine(point(0, 1.0), point(n_gamma, 1.0))
        painter.drawText(point(n_gamma, 1.0) + QPointF(-70, -4), "break-even")

        if self.current_gamma is not None:
            painter.setPen(QPen(muted, 1, Qt.PenStyle.DotLine))
            painter.drawLine(point(self.current_gamma, 0), point(self.current_gamma, top))
            # At the foot of its line: the best γ's label sits near the top of the curve.
            painter.drawText(point(self.current_gamma, 0) + QPointF(3, -4), "current γ")

        if self.curve:
            path = QPainterPath(point(0, self.curve[0]))
            for gamma, value in enumerate(self.curve[1:], start=1):
                path.lineTo(point(gamma, value))
            painter.setPen(QPen(CURVE_COLOR, 1.8))
            painter.drawPath(path)
        if self.best_gamma is not None and self.curve:
            best = point(self.best_gamma, self.curve[self.best_gamma])
            diamond = QPolygonF(
                [
                    best + QPointF(0, -6),
                    best + QPointF(6, 0),
                    best + QPointF(0, 6),
                    best + QPointF(-6, 0),
                ]
            )
            painter.setPen(QPen(BEST_COLOR, 1))
            painter.setBrush(BEST_COLOR)
            painter.drawPolygon(diamond)
            painter.setPen(QPen(text_color, 1))
            painter.drawText(best + QPointF(8, -6), f"best γ {self.best_gamma}")
        painter.setPen(QPen(MEASURED_COLOR.darker(130), 1))
        painter.setBrush(MEASURED_COLOR)
        for gamma, value in self.measured.items():
            painter.drawEllipse(point(gamma, value), 4.0, 4.0)
        if self.message:
            painter.setPen(QPen(muted, 1))
            painter.drawText(area, Qt.AlignmentFlag.AlignCenter, self.message)
        painter.end()
