"""The Insight panel: the cost model (docs/design.md) fed by the reply's real rounds, and what-if
sliders.

Three parts:
- a speedup-vs-γ chart: the curve the cost model predicts from the measured per-position
  acceptance and costs, the speedups actually measured at the γ values that ran (dots), the
  current and the best γ, and the break-even line (speedup 1 = plain decoding);
- the round table of the last reply, one line per real verification round, with the
  cumulative columns (tokens, draft passes, target passes, cost);
- what-if sliders (α, γ, c_draft, c_verify) showing E in both of its forms, the cost
  of a round, the speedup, target passes per token, the ceiling fraction and the best γ.

Standalone: the window calls update_live(rounds) from its metrics timer while a reply streams
and update_from_result(result) when it ends. The chart is painted with
QPainter (a redraw a few times a second must cost well under a millisecond).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSlider,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.result import GenerationResult
from app.metrics import cost_model
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.insight import Insight, analyse
from app.metrics.rounds import RoundRecord
from app.metrics.summary import METRIC_DEFINITIONS

DASH = "—"
CURVE_COLOR = QColor(52, 120, 246)
MEASURED_COLOR = QColor(46, 160, 67)
BEST_COLOR = QColor(230, 140, 20)

# The sliders open at the cost model's reference point (E 3.362, 2.40×; docs/design.md).
WHAT_IF_DEFAULTS = {"alpha": 0.80, "gamma": 4, "c_draft": 0.10, "c_verify": 1.00}
ROUND_COLUMNS = (
    "round",
    "γ",
    "drafted",
    "accepted",
    "rejected at",
    "tokens",
    "Σ tokens",
    "Σ draft passes",
    "Σ target passes",
    "cost",
    "Σ cost",
    "draft ms",
    "verify ms",
)


def _fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return DASH if value is None else f"{value:.{digits}f}{suffix}"


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


def _slider(name: str, maximum: int, value: int, tip: str) -> QSlider:
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setObjectName(name)
    slider.setRange(0, maximum)
    slider.setValue(value)
    slider.setToolTip(tip)
    return slider


class WhatIf(QGroupBox):
    """What-if sliders: set α, γ and the two costs, read E, cost, speedup and the ceiling."""

    # Slider steps: α and costs in hundredths, γ in whole tokens (γ up to 32, where the
    # cost model's sweep ends).
    SCALE = 100

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("What if… (the cost model)", parent)
        self.setObjectName("whatIfGroup")
        d = WHAT_IF_DEFAULTS
        s = self.SCALE
        self.alpha = _slider(
            "whatIfAlpha", s, round(d["alpha"] * s), "α: chance a draft token is accepted"
        )
        self.gamma = _slider("whatIfGamma", MAX_GAMMA, int(d["gamma"]), "γ")
        self.c_draft = _slider(
            "whatIfDraftCost", s, round(d["c_draft"] * s), "one draft pass, in target passes"
        )
        self.c_verify = _slider(
            "whatIfVerifyCost",
            3 * s,
            round(d["c_verify"] * s),
            "one verification pass (γ + 1 rows), in target passes; 1 is the idealisation",
        )
        self.c_verify.setMinimum(s // 10)  # a verification pass cannot be free
        self.values = {key: QLabel() for key in ("alpha", "gamma", "c_draft", "c_verify")}
        self.expected = QLabel()
        self.expected.setObjectName("whatIfExpected")
        self.cost = QLabel()
        self.cost.setObjectName("whatIfCost")
        self.speedup = QLabel()
        self.speedup.setObjectName("whatIfSpeedup")
        self.passes = QLabel()
        self.passes.setObjectName("whatIfPassesPerToken")
        self.ceiling = QLabel()
        self.ceiling.setObjectName("whatIfCeiling")
        self.best = QLabel()
        self.best.setObjectName("whatIfBestGamma")
        self.best.setWordWrap(True)
        self.from_measurement = QPushButton("Use measured")
        self.from_measurement.setObjectName("whatIfFromMeasurement")
        self.from_measurement.setEnabled(False)
        self.from_measurement.setToolTip("Set the sliders to the last reply's measured values")
        self.reset = QPushButton("Reference point")
        self.reset.setToolTip(
            "Back to the cost model's reference point: α 0.80, γ 4, c_draft 0.10, c_verify 1.00"
        )
        self.reset.setObjectName("whatIfReset")

        grid = QGridLayout()
        for row, (label, slider, key) in enumerate(
            [
                ("α", self.alpha, "alpha"),
                ("γ", self.gamma, "gamma"),
                ("c_draft", self.c_draft, "c_draft"),
                ("c_verify", self.c_verify, "c_verify"),
            ]
        ):
            grid.addWidget(QLabel(label), row, 0)
            grid.addWidget(slider, row, 1)
            self.values[key].setMinimumWidth(40)
            grid.addWidget(self.values[key], row, 2)
            slider.valueChanged.connect(self.recompute)
        for figure in (self.expected, self.cost, self.speedup):
            figure.setWordWrap(True)  # long formulas wrap in a narrow panel instead of clipping
        form = QFormLayout()
        # Narrow: a name above its value rather than a value squeezed off the right edge.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("E (tokens per round)", self.expected)
        form.addRow("cost per round", self.cost)
        form.addRow("speedup", self.speedup)
        form.addRow("target passes per token", self.passes)
        form.addRow("ceiling reached", self.ceiling)
        form.addRow("best γ", self.best)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addLayout(form)
        buttons = QGridLayout()
        buttons.addWidget(self.from_measurement, 0, 0)
        buttons.addWidget(self.reset, 0, 1)
        layout.addLayout(buttons)
        self.reset.clicked.connect(self.set_defaults)
        self.recompute()

    def set_values(self, alpha: float, gamma: int, c_draft: float, c_verify: float) -> None:
        s = self.SCALE
        for slider, value in (
            (self.alpha, round(alpha * s)),
            (self.gamma, gamma),
            (self.c_draft, round(c_draft * s)),
            (self.c_verify, round(c_verify * s)),
        ):
            slider.blockSignals(True)
            slider.setValue(value)
            slider.blockSignals(False)
        self.recompute()

    def set_defaults(self) -> None:
        d = WHAT_IF_DEFAULTS
        self.set_values(d["alpha"], int(d["gamma"]), d["c_draft"], d["c_verify"])

    def current(self) -> tuple[float, int, float, float]:
        s = self.SCALE
        return (
            self.alpha.value() / s,
            self.gamma.value(),
            self.c_draft.value() / s,
            self.c_verify.value() / s,
        )

    def recompute(self) -> None:
        alpha, gamma, c_draft, c_verify = self.current()
        self.values["alpha"].setText(f"{alpha:.2f}")
        self.values["gamma"].setText(str(gamma))
        self.values["c_draft"].setText(f"{c_draft:.2f}")
        self.values["c_verify"].setText(f"{c_verify:.2f}")
        e = cost_model.expected_tokens(alpha, gamma)
        series = " + ".join(f"{alpha:.2f}^{i}" for i in range(min(gamma, 3) + 1))
        if gamma > 3:
            series += " + …"
        # Both forms of E side by side: the series and the closed form agree.
        closed = DASH if alpha == 1.0 else f"{(1 - alpha ** (gamma + 1)) / (1 - alpha):.3f}"
        self.expected.setText(f"{e:.3f}   (closed form {closed})")
        self.expected.setToolTip(f"E as a series: {series} = {e:.3f}; closed form {closed}")
        cost = cost_model.round_cost(gamma, c_draft, c_verify)
        self.cost.setText(f"{cost:.2f}   ({gamma} × {c_draft:.2f} + {c_verify:.2f})")
        speedup = cost_model.speedup(alpha, gamma, c_draft, c_verify)
        verdict = "faster than plain" if speedup > 1.0 else "not faster than plain"
        self.speedup.setText(f"{speedup:.2f}×   ({verdict})")
        self.passes.setText(f"{cost_model.passes_per_token(alpha, gamma, c_draft, c_verify):.3f}")
        self.ceiling.setText(f"{cost_model.ceiling_fraction(alpha, gamma) * 100:.1f} %")
        choice = cost_model.best_gamma(alpha, c_draft, c_verify)
        text = f"{choice.gamma} at {choice.speedup:.2f}×"
        if choice.message:
            text += f" — {choice.message}"
        self.best.setText(text)


class InsightPanel(QWidget):
    """Cost model vs measurement for the current draft: chart, round table, what-if sliders."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("insightPanel")
        self.insight: Insight | None = None
        self._plain_step_s: float | None = None

        self.chart = SpeedupChart()
        self.chart.setObjectName("insightChart")
        self.summary = QLabel(DASH)
        self.summary.setObjectName("insightSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        d = METRIC_DEFINITIONS
        self.summary.setToolTip(
            f"This reply's rounds, read by the cost model.\nα: {d['alpha']}.\nThe Metrics "
            f"tab's acceptance rate: {d['acceptance_rate']}.\nc_draft: {d['c_draft']}.\n"
            f"c_verify: {d['c_verify']}."
        )
        self.table = QTableWidget(0, len(ROUND_COLUMNS))
        self.table.setObjectName("roundTable")
        self.table.setHorizontalHeaderLabels(list(ROUND_COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setToolTip(
            "The last reply's verification rounds. Each round yields accepted + 1 tokens (the +1 "
            "is the target's correction or bonus token). Costs are in plain target steps: "
            "γ × c_draft + c_verify(γ) with the measured costs; a plain step costs 1."
        )
        self.what_if = WhatIf()
        self.what_if.from_measurement.clicked.connect(self._what_if_from_measurement)

        # A short title: a group box is never narrower than its title.
        chart_box = QGroupBox("Speedup vs γ")
        chart_box.setToolTip("Predicted by the cost model (line) and measured (dots)")
        chart_layout = QVBoxLayout(chart_box)
        chart_layout.addWidget(self.chart, 1)
        chart_layout.addWidget(self.summary)
        table_box = QGroupBox("Rounds of the last reply")
        table_layout = QVBoxLayout(table_box)
        table_layout.addWidget(self.table)
        # The round table scrolls inside its box; the chart and the what-if keep their width.
        self.table.setMinimumWidth(0)
        layout = QVBoxLayout(self)
        layout.addWidget(chart_box, 3)
        layout.addWidget(table_box, 2)
        layout.addWidget(self.what_if)

    # -- feeding --------------------------------------------------------------------------------

    def update_live(self, rounds: Sequence[RoundRecord], plain_step_s: float | None = None) -> None:
        """Refresh the chart and figures from the rounds so far (call a few times a second).

        plain_step_s (the engine's) is optional here: without it the last one given is used, or
        the reply's own plain rounds.
        """
        if plain_step_s:
            self._plain_step_s = plain_step_s
        self.insight = analyse(rounds, self._plain_step_s)
        self._show(self.insight)

    def update_from_result(self, result: GenerationResult) -> None:
        """The finished reply: chart, figures and its full round table, in the unit of the
        plain step the engine measured (result.plain_step_s)."""
        if result.plain_step_s:
            self._plain_step_s = result.plain_step_s
        self.insight = analyse(result.rounds, self._plain_step_s)
        self._show(self.insight)
        self._fill_table(self.insight)

    def clear(self) -> None:
        self.insight = None
        self.chart.set_data(analyse([]))
        self.summary.setText(DASH)
        self.table.setRowCount(0)
        self.what_if.from_measurement.setEnabled(False)

    # -- rendering ------------------------------------------------------------------------------

    def _show(self, insight: Insight) -> None:
        self.chart.set_data(insight)
        conditional = ", ".join(
            f"{i}: {DASH if a is None else f'{a:.0%}'}"
            for i, a in enumerate(insight.conditional, start=1)
        )
        best = (
            DASH
            if insight.best_gamma is None or insight.best_speedup is None
            else f"{insight.best_gamma} ({insight.best_speedup:.2f}×)"
        )
        if insight.best_gamma == 0:
            best += ": no draft length pays, do not speculate"
        alpha = _fmt(None if insight.alpha is None else insight.alpha * 100, 1, " %")
        step = _fmt(None if insight.plain_step_s is None else insight.plain_step_s * 1000, 1, " ms")
        lines = [
            f"α, this reply (accepted / judged, not the acceptance rate): {alpha} · "
            f"per position: {conditional or DASH}",
            f"c_draft {_fmt(insight.c_draft)} · c_verify at γ {insight.current_gamma or DASH}: "
            f"{_fmt(insight.c_verify)} · plain step {step}",
            f"current γ {insight.current_gamma if insight.current_gamma is not None else DASH}: "
            f"predicted {_fmt(insight.predicted_at_current, 2, '×')}, measured "
            f"{_fmt(insight.measured.get(insight.current_gamma or -1), 2, '×')} · "
            f"whole reply measured {_fmt(insight.measured_overall, 2, '×')} · best γ {best}",
        ]
        self.summary.setText("\n".join(lines))
        ready = (
            insight.alpha is not None
            and insight.c_draft is not None
            and insight.c_verify is not None
        )
        self.what_if.from_measurement.setEnabled(ready)

    def _fill_table(self, insight: Insight) -> None:
        self.table.setRowCount(len(insight.table))
        for row, r in enumerate(insight.table):
            rejected = (
                "bonus"
                if r.rejected_at is None and r.drafted
                else (DASH if r.rejected_at is None else str(r.rejected_at))
            )
            cells = [
                str(r.index),
                str(r.gamma),
                str(r.drafted),
                str(r.accepted),
                rejected,
                str(r.tokens),
                str(r.cumulative_tokens),
                str(r.cumulative_draft_passes),
                str(r.cumulative_target_passes),
                _fmt(r.cost),
                _fmt(r.cumulative_cost),
                f"{r.draft_ms:.1f}",
                f"{r.verify_ms:.1f}",
            ]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)

    def _what_if_from_measurement(self) -> None:
        insight = self.insight
        if insight is None or insight.alpha is None or insight.c_draft is None:
            return
        c_verify = insight.c_verify
        if c_verify is None:
            return
        self.what_if.set_values(
            insight.alpha,
            insight.current_gamma or 1,
            min(insight.c_draft, 1.0),
            min(max(c_verify, 0.1), 3.0),
        )
