"""The Insight panel: the cost model (docs/design.md) fed by the reply's real rounds, and what-if
sliders.

Three parts:
- a speedup-vs-γ chart (ui/widgets/speedup_chart.py);
- the round table of the last reply, one line per real verification round, with the
  cumulative columns (tokens, draft passes, target passes, cost);
- what-if sliders (ui/widgets/what_if.py).

Standalone: the window calls update_live(rounds) from its metrics timer while a reply streams
and update_from_result(result) when it ends. The words and cells are app.metrics.insight_text's.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.result import GenerationResult
from app.metrics.insight import Insight, analyse
from app.metrics.insight_text import DASH, ROUND_COLUMNS, round_cells, summary_lines
from app.metrics.rounds import RoundRecord
from app.metrics.summary import METRIC_DEFINITIONS
from ui.widgets.speedup_chart import SpeedupChart
from ui.widgets.what_if import WhatIf


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
        # Tab leaves the table (the what-if sliders follow it); arrows move between cells.
        self.table.setTabKeyNavigation(False)
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

    def forget_plain_step(self) -> None:
        """Another target loaded: the plain step kept as the unit of costs was the old one's."""
        self._plain_step_s = None

    def clear(self) -> None:
        self.insight = None
        self.chart.set_data(analyse([]))
        self.summary.setText(DASH)
        self.table.setRowCount(0)
        self.what_if.from_measurement.setEnabled(False)

    # -- rendering ------------------------------------------------------------------------------

    def _show(self, insight: Insight) -> None:
        self.chart.set_data(insight)
        lines = summary_lines(insight)
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
            for column, text in enumerate(round_cells(r)):
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
