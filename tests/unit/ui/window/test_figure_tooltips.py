"""Tooltips on stand-in models: a figure's tip is its METRIC_DEFINITIONS text word for word
(the one place figures are defined), and a dropdown's tip names the entry it shows."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.metrics.summary import METRIC_DEFINITIONS
from tests.helpers.qt_window import send
from ui.widgets.charts import PositionBars
from ui.widgets.what_if import WhatIf
from ui.window.main_window import MainWindow

_COLUMN_DEFINITIONS = {
    "acceptance": "acceptance_rate",
    "tokens/round": "tokens_per_round",
    "c_draft": "c_draft",
    "c_verify": "c_verify",
    "tok/s": "tokens_per_second",
    "TTFT": "ttft_s",
}


def test_compare_column_tips_are_the_metric_definitions(window: MainWindow, qtbot: QtBot) -> None:
    send(qtbot, window, "Hello")
    dialog = window.open_compare_dialog()
    assert dialog is not None
    table = dialog.table
    tips = {}
    for column in range(table.columnCount()):
        header = table.horizontalHeaderItem(column)
        assert header is not None
        tips[header.text()] = header.toolTip()
    dialog.close()
    for title, key in _COLUMN_DEFINITIONS.items():
        assert tips[title] == METRIC_DEFINITIONS[key], title


def test_position_bar_tips_carry_the_metric_definition(qtbot: QtBot) -> None:
    bars = PositionBars()
    qtbot.addWidget(bars)
    definition = METRIC_DEFINITIONS["per_position_acceptance"]
    for values in ([], [0.5, None, 1.0]):
        bars.set_values(values)
        assert definition in bars.toolTip(), values


def test_what_if_slider_tips_carry_the_metric_definitions(qtbot: QtBot) -> None:
    what_if = WhatIf()
    qtbot.addWidget(what_if)
    for slider, key in (
        (what_if.alpha, "alpha"),
        (what_if.c_draft, "c_draft"),
        (what_if.c_verify, "c_verify"),
    ):
        assert METRIC_DEFINITIONS[key] in slider.toolTip(), slider.objectName()
    # γ here is a length to try, not the measured mean METRIC_DEFINITIONS["gamma"] defines.
    assert METRIC_DEFINITIONS["gamma"] not in what_if.gamma.toolTip()
    assert what_if.gamma.toolTip()


def test_model_dropdown_tips_name_the_selected_file(window: MainWindow) -> None:
    for combo in (window.controls.target_combo, window.controls.draft_combo):
        assert combo.currentText()
        assert combo.toolTip().splitlines()[0] == combo.currentText(), combo.objectName()
