"""The Insight panel's speedup-vs-γ chart: the curve the cost model predicts from the measured
per-position acceptance and costs, the speedups actually measured at the γ values that ran
(dots), the current and the best γ, and the break-even line (speedup 1 = plain decoding).

Painted with QPainter: a redraw a few times a second must cost well under a millisecond.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.metrics.cost_model import MAX_GAMMA
from app.metrics.insight import Insight
from ui.themes import muted

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

    def _plot(self) -> _Plot:
        metrics = QFontMetricsF(self.font())
        top = self._y_top()
        values = [(f"{value:.2f}×", value) for value in (1.0, top / 1.12, 0.0)]
        # The margin fits the widest scale label: a speedup of 10× or more has one digit more.
        left = max(metrics.horizontalAdvance(text) for text, _ in values) + 12
        area = QRectF(self.rect()).adjusted(left, 8, -10, -metrics.height() - 8)
        n_gamma = max(len(self.curve) - 1, max(self.measured, default=0), MAX_GAMMA)
        return _Plot(area, n_gamma, top, values, metrics)

    def label_rects(self) -> list[tuple[str, QRectF]]:
        """Every text painted and where: kept inside the widget and clear of each other, of
        the break-even line and of what is plotted (the curve, the dots, the best γ's
        diamond); a scale label with no clear place is dropped, and "best γ" and "current γ"
        sit on the plot only where nothing else is clear."""
        plot = self._plot()
        h = plot.metrics.height()
        bounds = QRectF(self.rect())
        break_even = plot.point(0, 1.0).y()
        line = QRectF(plot.area.left(), break_even - 0.5, plot.area.width(), 1.0)
        marks = self._mark_rects(plot)
        curve = [plot.point(gamma, value) for gamma, value in enumerate(self.curve)]
        placed: list[tuple[str, QRectF]] = []

        def clear(rect: QRectF, *, avoid_line: bool, avoid_plot: bool) -> bool:
            taken = [other for _, other in placed] + ([line] if avoid_line else [])
            if avoid_plot:
                taken += marks
            if any(rect.intersects(other) for other in taken):
                return False
            return not (avoid_plot and _meets_polyline(rect, curve))

        def place(
            text: str, candidates: list[QPointF], *, avoid_line: bool = True, keep: bool = False
        ) -> None:
            """Put text at the first top-left corner where it fits clear of the rest; one
            that must be kept may sit on the plot if nowhere else is clear."""
            size = QSizeF(plot.metrics.horizontalAdvance(text) + 2, h)
            rects = [_inside(QRectF(corner, size), bounds) for corner in candidates]
            for avoid_plot in (True, False) if keep else (avoid_line,):
                for rect in rects:
                    if clear(rect, avoid_line=avoid_line, avoid_plot=avoid_plot):
                        placed.append((text, rect))
                        return

        # The scale: break-even first, then the top; a label that would overlap one is dropped.
        for text, value in plot.values:
            width = plot.metrics.horizontalAdvance(text) + 2
            y = plot.point(0, value).y() - h / 2
            # Clear of the γ axis's "0", centred under the corner.
            place(text, [QPointF(plot.area.left() - 7 - width, y)], avoid_line=False)
        step = max(1, plot.n_gamma // 8)
        for gamma in range(0, plot.n_gamma + 1, step):
            x = plot.point(gamma, 0.0).x() - plot.metrics.horizontalAdvance(str(gamma)) / 2
            place(str(gamma), [QPointF(x, plot.area.bottom() + 2)], avoid_line=False)
        if self.best_gamma is not None and self.curve:
            best = plot.point(self.best_gamma, self.curve[self.best_gamma])
            text = f"best γ {self.best_gamma}"
            width = plot.metrics.horizontalAdvance(text) + 2
            area = plot.area
            place(
                text,
                [
                    best + QPointF(dx, dy)
                    for dy in (-6 - h, 6, -6 - 2 * h, 6 + h)
                    for dx in (8, -8 - width, -width / 2)
                ]
                # Failing a place beside its diamond, a corner of the plot.
                + [area.topRight() + QPointF(-width - 4, 2), area.topLeft() + QPointF(4, 2)],
                keep=True,
            )
        if self.current_gamma is not None:
            # At the foot of its line, else just above or below the break-even line.
            foot = plot.point(self.current_gamma, 0)
            width = plot.metrics.horizontalAdvance("current γ") + 2
            place(
                "current γ",
                [
                    foot + QPointF(3, -4 - h),
                    foot + QPointF(-3 - width, -4 - h),
                    QPointF(foot.x() + 3, break_even - 2 - h),
                    QPointF(foot.x() + 3, break_even + 2),
                ],
                keep=True,
            )
        width = plot.metrics.horizontalAdvance("break-even") + 2
        right = plot.area.right() - width
        place(
            "break-even",
            [
                QPointF(right, break_even - 2 - h),
                QPointF(right, break_even + 2),
                QPointF(plot.area.left() + 4, break_even - 2 - h),
            ],
            avoid_line=False,
        )
        return placed

    def _mark_rects(self, plot: _Plot) -> list[QRectF]:
        """Where the dots and the best γ's diamond are painted, a pixel to spare."""
        marks = [
            QRectF(plot.point(gamma, value) - QPointF(5, 5), QSizeF(10, 10))
            for gamma, value in self.measured.items()
        ]
        if self.best_gamma is not None and self.curve:
            best = plot.point(self.best_gamma, self.curve[self.best_gamma])
            marks.append(QRectF(best - QPointF(7, 7), QSizeF(14, 14)))
        return marks

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        text_color = palette.color(QPalette.ColorRole.WindowText)
        # Axis text must still read at 4.5:1; a translucent pen fell short of it.
        soft = muted(text_color, palette.color(QPalette.ColorRole.Window))
        plot = self._plot()
        area, top, point = plot.area, plot.top, plot.point

        painter.setPen(QPen(soft, 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        painter.drawLine(area.bottomLeft(), area.topLeft())
        # Break-even: below this line speculation loses to plain decoding.
        painter.setPen(QPen(text_color, 1, Qt.PenStyle.DashLine))
        painter.drawLine(point(0, 1.0), point(plot.n_gamma, 1.0))
        if self.current_gamma is not None:
            painter.setPen(QPen(soft, 1, Qt.PenStyle.DotLine))
            painter.drawLine(point(self.current_gamma, 0), point(self.current_gamma, top))

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
        painter.setPen(QPen(MEASURED_COLOR.darker(130), 1))
        painter.setBrush(MEASURED_COLOR)
        for gamma, value in self.measured.items():
            painter.drawEllipse(point(gamma, value), 4.0, 4.0)

        strong = {"break-even", f"best γ {self.best_gamma}"}
        for text, rect in self.label_rects():
            painter.setPen(QPen(text_color if text in strong else soft, 1))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        if self.message:
            painter.setPen(QPen(soft, 1))
            painter.drawText(area, Qt.AlignmentFlag.AlignCenter, self.message)
        painter.end()


@dataclass(frozen=True, slots=True)
class _Plot:
    """Where the chart's figures go: the plotting area and the scales of both axes."""

    area: QRectF
    n_gamma: int
    top: float
    values: list[tuple[str, float]]  # the scale's labels, in the order they are kept
    metrics: QFontMetricsF

    def point(self, gamma: float, speedup: float) -> QPointF:
        x = self.area.left() + self.area.width() * gamma / self.n_gamma
        y = self.area.bottom() - self.area.height() * speedup / self.top
        return QPointF(x, y)


def _meets_polyline(rect: QRectF, points: list[QPointF]) -> bool:
    """Whether the line through points passes through rect (sampled every pixel or so:
    exact enough for a label, and a few hundred checks at most)."""
    for start, end in itertools.pairwise(points):
        steps = max(1, int(max(abs(end.x() - start.x()), abs(end.y() - start.y()))))
        for i in range(steps + 1):
            if rect.contains(start + (end - start) * (i / steps)):
                return True
    return False


def _inside(rect: QRectF, bounds: QRectF) -> QRectF:
    """rect moved (not shrunk) to lie within bounds, as far as it fits."""
    dx = max(bounds.left() - rect.left(), 0.0) + min(bounds.right() - rect.right(), 0.0)
    dy = max(bounds.top() - rect.top(), 0.0) + min(bounds.bottom() - rect.bottom(), 0.0)
    return rect.translated(dx, dy)
