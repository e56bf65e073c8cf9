"""The painted charts carry their scale (0 and 100 % on the bars; the tokens/s peak and 100 %
acceptance on the sparkline) and stay readable in a 300 px wide panel; the Insight tab fits
300 px with its round table scrolling instead of widening the panel."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from tests.helpers.bench_data import result_from_rounds, seed_rounds
from ui.widgets.charts import PositionBars, Sparkline
from ui.widgets.insight_panel import InsightPanel

PANEL_PX = 300


def _shown(qtbot: QtBot, widget: QWidget) -> QImage:
    qtbot.addWidget(widget)
    widget.resize(PANEL_PX, widget.minimumHeight())
    widget.show()
    qtbot.waitExposed(widget)
    return widget.grab().toImage()


def _inked(image: QImage, rect: QRectF) -> bool:
    """Something other than the background colour was painted inside `rect`."""
    background = image.pixel(image.width() // 2, image.height() - 1)
    r = rect.toRect()
    return any(
        image.pixel(x, y) != background
        for x in range(max(r.left(), 0), min(r.right(), image.width()))
        for y in range(max(r.top(), 0), min(r.bottom(), image.height()))
    )


def _readable(widget: QWidget, labels: list[tuple[str, QRectF]]) -> None:
    bounds = QRectF(widget.rect())
    for text, rect in labels:
        assert bounds.contains(rect), (text, rect, bounds)  # whole, never cut by the edge
    for i, (text, rect) in enumerate(labels):
        for other, other_rect in labels[i + 1 :]:
            assert not rect.intersects(other_rect), (text, other)


def test_the_sparkline_names_its_peak_and_full_acceptance(qtbot: QtBot) -> None:
    spark = Sparkline()
    spark.set_series([None, 10.0, 34.6, 20.0], [None, 0.5, 0.9, None])
    image = _shown(qtbot, spark)
    labels = spark.scale_labels()
    assert [text for text, _rect in labels] == ["35 tok/s peak", "top = 100 % acceptance"]
    _readable(spark, labels)
    for _text, rect in labels:
        assert _inked(image, rect)
    spark.set_series([], [])
    assert spark.scale_labels()[0][0] == "tok/s"  # no peak yet: the unit alone


def test_the_position_bars_have_a_0_to_100_percent_scale(qtbot: QtBot) -> None:
    bars = PositionBars()
    bars.set_values([0.95, 0.8, 0.5, None])
    image = _shown(qtbot, bars)
    labels = bars.scale_labels()
    assert [text for text, _rect in labels] == ["100 %", "0 %"]
    _readable(bars, labels)
    area = bars.plot_area()
    for _text, rect in labels:
        assert rect.right() <= area.left() and _inked(image, rect)
    # The 100 % label sits on the top line and 0 % on the base line.
    assert labels[0][1].center().y() == area.top() and labels[1][1].center().y() == area.bottom()
    assert area.width() >= PANEL_PX * 0.75  # the scale leaves the bars most of the width


@pytest.mark.parametrize("positions", [4, 16, 38, 64, 300])
def test_the_position_numbers_never_overlap_however_long_the_drafts(
    qtbot: QtBot, positions: int
) -> None:
    bars = PositionBars()
    bars.set_values([0.9] * positions)
    image = _shown(qtbot, bars)
    labels = bars.position_labels()
    _readable(bars, labels)  # whole and apart
    assert all(_inked(image, rect) for _text, rect in labels)
    assert labels[0][0] == "1"
    if positions <= 4:  # each number, where they fit
        assert [text for text, _rect in labels] == [str(i) for i in range(1, positions + 1)]


def test_the_insight_tab_fits_a_300_px_panel(qtbot: QtBot) -> None:
    panel = InsightPanel()
    panel.update_from_result(result_from_rounds(seed_rounds()))
    assert panel.minimumSizeHint().width() <= PANEL_PX
    # As the window holds it: in a vertical scroll area, never a sideways one.
    scroll = QScrollArea()
    qtbot.addWidget(scroll)
    scroll.setWidget(panel)
    scroll.setWidgetResizable(True)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.resize(PANEL_PX, 600)
    scroll.show()
    qtbot.waitExposed(scroll)
    assert panel.width() <= PANEL_PX
    for part in (panel.chart, panel.what_if, panel.summary):
        assert part.minimumSizeHint().width() <= part.width(), part.objectName()
        right = part.mapTo(panel, part.rect().topRight()).x()
        assert right < panel.width(), part.objectName()
    # Every what-if figure and the summary are shown whole: as tall as their wrapped text.
    what_if = panel.what_if
    for label in (what_if.expected, what_if.cost, what_if.speedup, panel.summary):
        assert label.height() >= label.heightForWidth(label.width()), label.text()
    assert panel.table.horizontalScrollBar().maximum() > 0  # the round table scrolls instead


def test_the_insight_tab_forgets_the_old_targets_plain_step(qtbot: QtBot) -> None:
    """Costs are in units of the loaded target's plain step: after another target loads, a
    reply's live figures must not be priced in the old one's."""
    panel = InsightPanel()
    qtbot.addWidget(panel)
    old = result_from_rounds(seed_rounds())
    panel.update_from_result(replace(old, plain_step_s=0.5))
    panel.update_live(seed_rounds())
    assert panel.insight is not None and panel.insight.plain_step_s == 0.5
    panel.forget_plain_step()
    panel.update_live(seed_rounds())
    assert panel.insight is not None and panel.insight.plain_step_s != 0.5
