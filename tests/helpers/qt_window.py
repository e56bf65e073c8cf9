"""The window as the tests drive it: preferences written where the window reads them, the
production composition opened and closed, a reply sent and waited for, and a probe that measures
how long the UI thread's event loop ever goes without running."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QEventLoop,
    QObject,
    QPoint,
    QPointF,
    QSettings,
    Qt,
    QTimer,
    Signal,
    SignalInstance,
)
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app.store import ConversationStore
from ui.main import create_window, ensure_application
from ui.settings import Settings
from ui.window.main_window import MainWindow, UiState

# One llama.cpp thread per model: these tests share two cores with other work, and llama.cpp's
# spinning thread pool slows down tenfold when it has more threads than free cores.
TEST_THREADS = 1
MAX_TOKENS = 32


def demo_preferences(demo: Any, **overrides: Any) -> dict[str, Any]:
    """Preferences for the demo pair, as a user who picked F32 + Q4_1 would have them."""
    values: dict[str, Any] = {
        "models/target": str(demo.f32),
        "models/draft": str(demo.q4_1),
        "models/extra_files": [
            str(p) for p in (demo.f32, demo.q8_0, demo.q4_1, demo.q4_0, demo.q2_k)
        ],
        "models/n_threads": TEST_THREADS,
        "models/n_ctx": 2048,
        "generation/max_tokens": MAX_TOKENS,
    }
    values.update(overrides)
    return values


def write_preferences(data_dir: Path, values: dict[str, Any]) -> None:
    qs = QSettings(str(data_dir / "settings.ini"), QSettings.Format.IniFormat)
    for key, value in values.items():
        qs.setValue(key, value)
    qs.sync()


def open_window(data_dir: Path) -> MainWindow:
    """The production composition (ui.main.create_window) on a given data folder."""
    ensure_application()
    settings = Settings(QSettings(str(data_dir / "settings.ini"), QSettings.Format.IniFormat))
    store = ConversationStore(data_dir / "conversations.sqlite3")
    window = create_window(store, settings, models_folder=data_dir / "models")
    window.show()
    return window


def wait_signal(signal: SignalInstance, timeout_s: float = 60.0) -> tuple[Any, ...]:
    """Run the event loop until `signal` fires; usable where qtbot is not (module fixtures)."""
    loop = QEventLoop()
    got: list[tuple[Any, ...]] = []

    def on_signal(*args: Any) -> None:
        got.append(args)
        loop.quit()

    signal.connect(on_signal)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(on_signal)
    if not got:
        raise TimeoutError(f"no signal within {timeout_s} s")
    return got[0]


def start_and_wait(window: MainWindow, timeout_s: float = 120.0) -> None:
    window.start()
    wait_signal(window.catalogChanged, timeout_s)
    assert window.state == UiState.Idle, window.banner.text


def close_window(window: MainWindow) -> None:
    window.close()
    assert window.is_shut_down()
    assert window.host.engine_thread.isFinished()
    window.deleteLater()
    QApplication.processEvents()


class StallProbe(QObject):
    """A 10 ms timer on the UI thread that records the longest time between its ticks.

    If anything blocks the event loop (a synchronous model call, a slow render), the next tick
    comes late by that much.
    """

    tick = Signal()

    def __init__(self, interval_ms: int = 10) -> None:
        super().__init__()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._on_tick)
        self.gaps_ms: list[float] = []
        self._last: float | None = None

    def start(self) -> None:
        self.gaps_ms.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _on_tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.gaps_ms.append((now - self._last) * 1000.0)
        self._last = now

    @property
    def max_gap_ms(self) -> float:
        return max(self.gaps_ms, default=0.0)


REPLY_TIMEOUT_MS = 90_000


def wheel(widget: QWidget, steps: int) -> None:
    """Turn a mouse wheel over the widget's centre: one notch is 120, positive steps turn it
    away from the user (up)."""
    centre = widget.rect().center()
    event = QWheelEvent(
        QPointF(centre),
        QPointF(widget.mapToGlobal(centre)),
        QPoint(),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def send(qtbot: QtBot, window: MainWindow, text: str) -> dict[str, Any]:
    """Type a message, click Send, wait for the reply; return the reply's stats."""
    window.prompt.setPlainText(text)
    with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    return dict(blocker.args[0])
