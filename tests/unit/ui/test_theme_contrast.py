"""WCAG 2 contrast of the light and dark themes, computed from their colours: text at AA
(4.5:1) on what it is painted on, and status text coloured again when the theme changes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from ui.dialogs.tables import make_item, make_table
from ui.status_text import show_status
from ui.themes import Status, apply_theme, muted, readable, status_color
from ui.widgets.charts import ACCEPT_COLOR, RATE_COLOR
from ui.widgets.conversation_view import ConversationView

_ROLE = QPalette.ColorRole


def _ratio(a: QColor, b: QColor) -> float:
    """Worked out here, not with the themes' own helper, so that a slip there shows."""

    def luminance(color: QColor) -> float:
        def channel(value: int) -> float:
            v = value / 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        r, g, b = (channel(c) for c in (color.red(), color.green(), color.blue()))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.fixture(params=["light", "dark"])
def palette(request: pytest.FixtureRequest, qtbot: QtBot) -> Iterator[QPalette]:
    del qtbot  # the application
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, request.param)
    try:
        yield QPalette(app.palette())
    finally:
        apply_theme(app, "system")


def test_status_text_reads_on_every_background_of_the_theme(palette: QPalette) -> None:
    for status in Status:
        color = status_color(status, palette)
        for role in (_ROLE.Window, _ROLE.Base, _ROLE.AlternateBase):
            ratio = _ratio(color, palette.color(role))
            assert ratio >= 4.5, (status, role, color.name(), round(ratio, 2))


def test_selected_rows_and_placeholders_read_at_aa(palette: QPalette) -> None:
    selected = _ratio(palette.color(_ROLE.HighlightedText), palette.color(_ROLE.Highlight))
    assert selected >= 4.5
    for role in (_ROLE.Window, _ROLE.Base, _ROLE.AlternateBase):
        assert _ratio(palette.color(_ROLE.PlaceholderText), palette.color(role)) >= 4.5, role


def test_chart_axis_text_reads_at_aa(palette: QPalette) -> None:
    window = palette.color(_ROLE.Window)
    assert _ratio(muted(palette.color(_ROLE.WindowText), window), window) >= 4.5


def test_muted_conversation_text_reads_at_aa(palette: QPalette, qtbot: QtBot) -> None:
    del palette  # applied to the application, which the view paints from
    view = ConversationView()
    qtbot.addWidget(view)
    page = view.palette().color(_ROLE.Base)
    assert _ratio(QColor(view._muted), page) >= 4.5
    text = QColor(view._text_color)
    for shade in (view._mark_color, view._suffix_color):  # text on the shading still reads
        assert _ratio(text, QColor(shade)) >= 4.5, shade


def test_status_text_is_coloured_again_when_the_theme_changes(qtbot: QtBot) -> None:
    """Fixed in a style sheet or an item's brush, the dark theme's light red would stay on
    the light theme's background at under 2.3:1."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    label = QLabel("cannot load it")
    qtbot.addWidget(label)
    table = make_table(("Verdict",), "verdicts")
    qtbot.addWidget(table)
    table.setRowCount(1)
    table.setItem(0, 0, make_item("refused", Status.ERROR))
    apply_theme(app, "dark")
    try:
        show_status(label, Status.ERROR)
        dark = status_color(Status.ERROR)
        apply_theme(app, "light")
        QApplication.processEvents()
        light = status_color(Status.ERROR)
        assert light != dark
        assert label.styleSheet() == f"color: {light.name()};"
        item = table.item(0, 0)
        assert item is not None and item.foreground().color() == light
    finally:
        apply_theme(app, "system")


def test_the_sparklines_series_names_read_at_aa_in_their_own_hue(palette: QPalette) -> None:
    ink, paper = palette.color(_ROLE.WindowText), palette.color(_ROLE.Window)
    for series in (RATE_COLOR, ACCEPT_COLOR):
        shown = readable(series, ink, paper)
        assert _ratio(shown, paper) >= 4.5, (series.name(), shown.name())
        # Moved toward the text only: the series' hue stays recognisable.
        assert abs(shown.hue() - series.hue()) <= 10 or shown == ink, shown.name()
