"""Every speed figure on screen comes from one definition: the headline, the stats line under
the reply and the Metrics tab agree, an estimate says it is one, and the two acceptance
figures (this reply's acceptance rate, the cost model's α) say which is which."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app.metrics.summary import METRIC_DEFINITIONS
from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow, UiState


def test_the_speedup_is_an_estimate_until_a_plain_reply_measured_plain_speed(
    window: MainWindow, qtbot: QtBot
) -> None:
    first = send(qtbot, window, "Hello")
    assert first["speedup_measured"] is False
    assert "estimate" in window.controls.headline.text()
    assert f"≈{first['speedup']:.2f}× plain speed (estimate)" in first["summary"]

    window.controls.speculation.setChecked(False)
    plain = send(qtbot, window, "Now without a draft")
    assert plain["mode"] == "plain" and plain["generated_tokens"] >= 8
    window.controls.speculation.setChecked(True)

    spec = send(qtbot, window, "And with the draft again")
    assert spec["speedup_measured"] is True
    assert spec["speedup"] == pytest.approx(spec["tokens_per_second"] / plain["tokens_per_second"])
    figure = f"{spec['speedup']:.2f}×"
    headline = window.controls.headline.text()
    assert figure in headline and "estimate" not in headline
    assert f"{figure} plain speed" in spec["summary"] and "estimate" not in spec["summary"]
    assert window.metrics.tokens_per_second.text() == f"{spec['tokens_per_second']:.1f} tok/s"
    assert METRIC_DEFINITIONS["tokens_per_second"] in window.controls.headline.toolTip()

    # The same target reloaded with other threads runs at another plain speed: estimated again.
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        window.settings_panel.threads.setValue(2)
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    again = send(qtbot, window, "Once more with the draft")
    assert again["speedup_measured"] is False
    assert "estimate" in window.controls.headline.text()


def test_the_acceptance_rate_and_the_cost_models_alpha_say_which_is_which(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "Hello")
    assert "not the acceptance rate" in window.insight.summary.text()
    assert METRIC_DEFINITIONS["alpha"] in window.insight.summary.toolTip()
    assert METRIC_DEFINITIONS["acceptance_rate"] in window.insight.summary.toolTip()
    assert METRIC_DEFINITIONS["alpha"] in window.metrics.acceptance.toolTip()
