"""The window on a 1280×720 screen, as a new user sees it: long model names, long headlines and
a mouse wheel turned over the side panel must not push Send off-screen or change a setting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QScrollArea
from pytestqt.qtbot import QtBot

from app.llama.facts import MemoryUsage
from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.model_files import write_tiny_gguf
from tests.helpers.qt_window import close_window, wheel
from ui.window.main_window import MainWindow

LONG_NAME = "SmolLM2-135M-Instruct-a-very-long-fine-tune-name-with-its-training-run-F32"


@pytest.fixture
def long_named(qtbot: QtBot, isolated_data_dir: Path, tmp_path: Path) -> Iterator[MainWindow]:
    folder = tmp_path / "gguf"
    files = {
        "target": write_tiny_gguf(folder / f"{LONG_NAME}.gguf", tensor_elements=4096),
        "target2": write_tiny_gguf(folder / "second-target.gguf", tensor_elements=2048),
        "draft": write_tiny_gguf(folder / f"{LONG_NAME}-small-draft.gguf", tensor_elements=64),
    }
    window = open_fake_window(isolated_data_dir, files)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    yield window
    close_window(window)


def test_the_window_fits_the_screen_with_long_model_names(
    long_named: MainWindow, qtbot: QtBot
) -> None:
    window = long_named
    free = window.screen().availableGeometry()
    qtbot.waitUntil(lambda: window.controls.target_combo.count() > 0, timeout=TIMEOUT_MS)
    QApplication.processEvents()
    assert window.frameGeometry().width() <= free.width()
    assert window.width() <= free.width() and window.height() <= free.height()
    # Send, Stop and the side panel are inside the window, not past its right edge.
    for widget in (window.send_button, window.stop_button, window.side_tabs):
        right = widget.mapTo(window, QPoint(widget.width(), 0)).x()
        assert right <= window.width(), widget.objectName()
    # Under a window manager a window grows to its layout's minimum: the longest texts the
    # bar shows (a slow draft's headline, a file being written) must not raise it.
    window.controls.show_headline(
        "0.60×: slower than without a draft. Try γ Auto or another draft.", ""
    )
    window.load_label.setText(f"writing {LONG_NAME}.gguf: 120.0 MiB of about 514.8 MiB")
    window.load_row.show()
    assert window.minimumSizeHint().width() <= free.width() * 0.8
    window.load_row.hide()
    combo = window.controls.target_combo
    assert LONG_NAME in combo.currentText()
    assert combo.shown_text().endswith("…")
    assert LONG_NAME in combo.toolTip()


def test_the_side_panel_and_the_headline_fit_their_room_at_1280_1024_and_the_narrowest(
    long_named: MainWindow, qtbot: QtBot
) -> None:
    window = long_named
    slow = "≈0.70×: slower than without a draft (estimate). Try another draft."
    window.controls.show_headline(slow, "")
    usage = MemoryUsage(540 * 2**20, 90 * 2**20, 0, 0, 0, 0)
    # The longest value the memory form shows: the chat-history draft's.
    window.metrics.show_memory(None, 0, usage, "ngram")
    scroll = window.side_tabs.widget(0)
    assert isinstance(scroll, QScrollArea)
    for width, height in ((1280, 720), (1024, 640), (0, 640)):
        window.resize(width, height)  # 0: as narrow as the window lets itself be dragged
        QApplication.processEvents()
        assert window.width() >= width and window.width() <= 1280
        inner = scroll.widget()
        # The panel never scrolls sideways, so anything wider than its view is cut off.
        assert inner.minimumSizeHint().width() <= scroll.viewport().width(), (width, height)
        headline = window.controls.headline
        assert headline.text() == slow and headline.toolTip().startswith(slow)
        shown = headline.shown_text()
        assert shown == slow or (shown.endswith("…") and slow.startswith(shown[:-1]))
        assert headline.fontMetrics().horizontalAdvance(shown) <= headline.width()


def test_a_saved_geometry_wider_than_the_screen_is_shrunk_to_fit(
    long_named: MainWindow, qtbot: QtBot
) -> None:
    window = long_named
    free = window.screen().availableGeometry()
    window.resize(free.width() + 500, free.height() + 300)
    window.fit_screen()
    assert window.width() <= free.width() and window.height() <= free.height()


def test_the_wheel_over_a_setting_scrolls_the_panel_and_leaves_the_setting(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.resize(1280, 720)
    panel = window.settings_panel
    scroll = panel.parentWidget()
    while scroll is not None and not isinstance(scroll, QScrollArea):
        scroll = scroll.parentWidget()
    assert isinstance(scroll, QScrollArea)
    bar = scroll.verticalScrollBar()
    assert bar.maximum() > 0, "the side panel must scroll at 720 px for this test to mean much"
    before = panel.context.value()
    loads: list[bool] = []
    window.models.loadingChanged.connect(loads.append)
    window.prompt.setFocus()
    for widget in (panel.context, panel.max_tokens, window.controls.gamma):
        wheel(widget, -2)
    assert panel.context.value() == before
    assert window.settings.get_int("models/n_ctx") == before
    assert bar.value() > 0  # the panel scrolled instead
    # Clicked into, the box takes the wheel as a user would expect.
    panel.max_tokens.setFocus()
    start = panel.max_tokens.value()
    wheel(panel.max_tokens, 1)
    assert panel.max_tokens.value() == start + 1
    qtbot.wait(50)
    assert loads == []


def test_the_wheel_over_the_target_dropdown_does_not_switch_models(
    window: MainWindow, qtbot: QtBot
) -> None:
    combo = window.controls.target_combo
    before = combo.currentIndex()
    window.prompt.setFocus()
    wheel(combo, -1)
    wheel(combo, 1)
    assert combo.currentIndex() == before
    assert window.models.loading is False


def test_the_models_dialog_and_its_close_button_fit_the_screen(
    window: MainWindow, qtbot: QtBot
) -> None:
    dialog = window.open_models_dialog()
    qtbot.waitUntil(lambda: not dialog.busy, timeout=TIMEOUT_MS)
    free = dialog.screen().availableGeometry()
    assert free.contains(dialog.frameGeometry()), (dialog.frameGeometry(), free)
    close = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Close)
    bottom_right = close.mapToGlobal(QPoint(close.width(), close.height()))
    assert free.contains(bottom_right)
    assert dialog.minimumSizeHint().height() <= free.height()
    dialog.close()
