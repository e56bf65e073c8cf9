"""The Insight tab's speedup chart keeps every label whole, inside the widget and clear of the
others: large speedups (a wider scale), the best γ at the right edge, a break-even line low
on the scale."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QRectF, QSizeF
from PySide6.QtGui import QFontMetricsF
from pytestqt.qtbot import QtBot

from app.metrics.cost_model import MAX_GAMMA
from ui.widgets.speedup_chart import SpeedupChart

_CASES = {
    # The stand-in models' figures: 16.65× at the last γ.
    "large, best last": ([1.0 + g * 0.99 for g in range(MAX_GAMMA + 1)], MAX_GAMMA, 4),
    "large, current at 1": ([1.0 + g * 0.99 for g in range(MAX_GAMMA + 1)], MAX_GAMMA, 1),
    "modest": ([1.0, 1.4, 1.7, 1.8, 1.75, *[1.7 - 0.05 * g for g in range(12)]], 3, 3),
    "slower than plain": ([1.0, *[0.9 - 0.02 * g for g in range(MAX_GAMMA)]], 0, 2),
}


def _chart(
    qtbot: QtBot, curve: list[float], best: int, current: int, size: tuple[int, int]
) -> SpeedupChart:
    chart = SpeedupChart()
    qtbot.addWidget(chart)
    chart.resize(*size)
    chart.curve = tuple(curve)
    chart.measured = {current: curve[current]}
    chart.best_gamma = best
    chart.current_gamma = current
    chart.message = ""
    return chart


@pytest.mark.parametrize("size", [(300, 160), (420, 240)])
@pytest.mark.parametrize("case", list(_CASES))
def test_chart_labels_stay_inside_and_never_overlap(
    qtbot: QtBot, case: str, size: tuple[int, int]
) -> None:
    curve, best, current = _CASES[case]
    chart = _chart(qtbot, curve, best, current, size)
    labels = chart.label_rects()
    bounds = QRectF(chart.rect())
    metrics = QFontMetricsF(chart.font())
    area = chart._plot().area
    for text, rect in labels:
        assert bounds.contains(rect), (text, rect)
        if text.endswith("×"):
            assert rect.right() <= area.left(), text  # left of the axis, not under it
        assert rect.width() >= metrics.horizontalAdvance(text), text  # never cut short
    for (a, ra), (b, rb) in itertools.combinations(labels, 2):
        assert not ra.intersects(rb), (a, b)
    texts = [text for text, _ in labels]
    assert f"best γ {best}" in texts
    assert "current γ" in texts and "1.00×" in texts
    top = max(*curve, 1.0)
    if top >= 10:
        assert f"{top:.2f}×" in texts


@pytest.mark.parametrize("size", [(300, 160), (420, 240)])
@pytest.mark.parametrize("case", list(_CASES))
def test_the_best_gamma_label_keeps_off_the_curve_and_the_dots(
    qtbot: QtBot, case: str, size: tuple[int, int]
) -> None:
    curve, best, current = _CASES[case]
    chart = _chart(qtbot, curve, best, current, size)
    # Dots at every γ up to the best, a little above the curve, as γ auto's steps leave them.
    chart.measured = {gamma: curve[gamma] * 1.04 for gamma in range(best + 1)}
    plot = chart._plot()
    rect = dict(chart.label_rects())[f"best γ {best}"]
    for gamma, value in [*chart.measured.items(), (best, curve[best])]:
        assert not rect.intersects(
            QRectF(plot.point(gamma, value), QSizeF()).adjusted(-4, -4, 4, 4)
        )
    for gamma, value in enumerate(curve):
        assert not rect.contains(plot.point(gamma, value)), gamma
    for gamma in range(len(curve) - 1):
        middle = (plot.point(gamma, curve[gamma]) + plot.point(gamma + 1, curve[gamma + 1])) / 2
        assert not rect.contains(middle), gamma


def test_the_current_gamma_label_is_not_struck_through_by_break_even(qtbot: QtBot) -> None:
    curve, best, current = _CASES["large, current at 1"]
    chart = _chart(qtbot, curve, best, current, (300, 160))
    rect = dict(chart.label_rects())["current γ"]
    plot = chart._plot()
    break_even = plot.point(0, 1.0).y()
    assert not rect.top() <= break_even <= rect.bottom()
