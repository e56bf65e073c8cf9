"""The Models dialog, the Insight panel and the Compare dialog as parts of the chat window.

Real demo models; one window shared by the module (see conftest.chat), left idle after each test.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import psutil
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.metrics.cost_model import MAX_GAMMA
from tests.helpers.qt_window import send
from ui.dialogs.compare_dialog import CompareDialog
from ui.window.compare import compare_drafts
from ui.window.main_window import MainWindow, UiState

SCAN_TIMEOUT_MS = 60_000
COMPARE_TIMEOUT_MS = 180_000


def button(window: MainWindow, name: str) -> QPushButton:
    found = window.findChild(QPushButton, name)
    assert found is not None, name
    return found


def test_models_button_lists_the_demo_models(
    window: MainWindow, qtbot: QtBot, demo_models: Any, tmp_path: Path
) -> None:
    qtbot.mouseClick(button(window, "modelsButton"), Qt.MouseButton.LeftButton)
    dialog = window.dialogs.models_dialog
    assert dialog is not None and dialog.isVisible()
    # The demo files were added one by one (conftest): the dialog gets those files, not the
    # rest of their folder.
    assert demo_models.f32 in dialog.extra_dirs
    assert demo_models.f32.parent not in dialog.extra_dirs
    demo = {p.resolve() for p in (demo_models.f32, demo_models.q8_0, demo_models.q4_0)}
    qtbot.waitUntil(
        lambda: demo <= {e.path.resolve() for e in dialog.entries}, timeout=SCAN_TIMEOUT_MS
    )

    # A folder added in the dialog is remembered, and the dropdowns are refreshed.
    folder = tmp_path / "more-models"
    folder.mkdir()
    with qtbot.waitSignal(window.catalogChanged, timeout=SCAN_TIMEOUT_MS):
        dialog.add_folder(folder)
    assert str(folder) in window.settings.get_list("models/extra_folders")
    assert folder in window.models.library_folders()
    dialog.local.remove_folder(folder)
    assert str(folder) not in window.settings.get_list("models/extra_folders")
    # The demo files' own folder is untouched by that.
    assert str(demo_models.f32) in window.settings.get_list("models/extra_files")
    qtbot.waitUntil(lambda: not dialog.busy, timeout=SCAN_TIMEOUT_MS)
    dialog.reject()


def test_reply_feeds_the_insight_panel_and_locks_compare(window: MainWindow, qtbot: QtBot) -> None:
    compare = button(window, "compareButton")
    assert not compare.isEnabled()  # a fresh chat has no prompt to compare on
    window.settings.set("generation/max_tokens", 48)
    live: list[int] = []
    locked: list[bool] = []

    def sample() -> None:
        # What the panel shows at each throttled refresh while the reply streams.
        if window.state == UiState.Generating:
            insight = window.insight.insight
            live.append(len(window.flow.live.rounds) if insight is not None else -1)
            locked.append(not compare.isEnabled())

    window.metrics_timer.timeout.connect(sample)
    try:
        stats = send(qtbot, window, "Write a long story about a dragon who learns to cook.")
    finally:
        window.metrics_timer.timeout.disconnect(sample)

    assert stats["mode"] == "hybrid"
    assert live and all(n >= 0 for n in live), "the insight panel was not refreshed live"
    assert locked and all(locked), "Compare was enabled while the reply was generating"
    assert compare.isEnabled()
    result = window.flow.last_result
    assert result is not None
    panel = window.insight
    assert panel.objectName() == "insightPanel"
    assert panel.table.rowCount() == len(result.rounds) > 0
    assert panel.insight is not None
    # The γ of the last speculative round, the length that ran: under γ Auto the suffix index's
    # tokens may run past the controller's γ (they cost no draft pass), never past the ceiling.
    gamma = panel.insight.current_gamma
    assert gamma is not None and 1 <= gamma <= MAX_GAMMA
    assert gamma == [r for r in result.rounds if r.speculative][-1].gamma
    assert f"current γ {gamma}" in panel.summary.text()
    assert panel.insight.plain_step_s is not None and panel.insight.plain_step_s > 0

    window.new_chat()
    assert panel.table.rowCount() == 0 and not compare.isEnabled()


class PeakRss:
    """The process's resident memory before a block and at its highest during it (sampled)."""

    def __enter__(self) -> PeakRss:
        self._process = psutil.Process()
        self.start = self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


def test_compare_dialog_runs_on_the_last_prompt(window: MainWindow, qtbot: QtBot) -> None:
    prompt = "Name three colours."
    send(qtbot, window, prompt)
    catalog = window.models.catalog
    assert catalog is not None and catalog.target is not None
    expected = {
        Path(d.path).name
        for d in catalog.drafts
        if d.compatible and d.size_bytes < catalog.target.size_bytes
    }
    assert expected, "the demo family has compatible drafts"
    assert {d.label for d in compare_drafts(window.models.catalog)} == expected
    # Each draft drafts as the chat's would: with the chat history unless Settings says not.
    assert all(d.suffix for d in compare_drafts(catalog))
    assert not any(d.suffix for d in compare_drafts(catalog, with_history=False))

    loaded_before = window.models.loaded
    assert loaded_before is not None and loaded_before.target is not None
    target_weights = loaded_before.memory.target_weights
    window.settings.set("generation/max_tokens", 8)  # the comparison's length: keep it short
    qtbot.mouseClick(button(window, "compareButton"), Qt.MouseButton.LeftButton)
    dialog = window.dialogs.compare_dialog
    assert isinstance(dialog, CompareDialog) and dialog.isVisible()
    assert dialog.prompt.toPlainText() == prompt
    gc.collect()
    with (
        PeakRss() as rss,
        qtbot.waitSignal(dialog.reportReady, timeout=COMPARE_TIMEOUT_MS) as blocker,
    ):
        qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    report = blocker.args[0]
    # Plain, then each draft at the chat's γ (Auto, the default).
    assert dialog.table.rowCount() == 1 + len(expected)
    assert {c.label for c in report.configs} == {f"{name} γ=auto" for name in expected}
    assert dialog.wait()
    # It ran on the chat's own models, one extra draft at a time: no second copy of the target
    # (which would add 100 % of its weights).
    rise = rss.peak - rss.start
    print(
        f"\nCompare, {len(expected)} drafts: peak RSS rose {rise / 2**20:.0f} MiB = "
        f"{rise / target_weights:.0%} of the target's weights"
    )
    assert rise < 0.30 * target_weights
    assert window.models.loaded is loaded_before and window.state == UiState.Idle

    dialog.reject()
    qtbot.waitUntil(lambda: window.dialogs.compare_dialog is None, timeout=5000)
