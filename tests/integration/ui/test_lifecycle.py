"""Starting, closing, restarting and killing the app, on the real engine and demo models."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from app.store import ConversationStore
from models.demo import demo_file_name
from tests.helpers.qt_window import (
    TEST_THREADS,
    StallProbe,
    close_window,
    demo_preferences,
    open_window,
    send,
    start_and_wait,
    write_preferences,
)
from tests.helpers.timing import report_timing
from ui.window.main_window import UiState

TIMEOUT_MS = 90_000
STORY = "Write a long story about a dragon who learns to cook."


def test_with_nothing_configured_the_demo_pair_loads_and_is_selected(
    qtbot: QtBot, demo_models: Any, isolated_data_dir: Path, request: pytest.FixtureRequest
) -> None:
    # The demo files would be derived into the data folder on first run (models.demo); link
    # the session's copies there so this test measures the window, not quantization.
    demo_dir = isolated_data_dir / "models" / "demo"
    demo_dir.mkdir(parents=True)
    for type_name, path in (
        ("F32", demo_models.f32),
        ("Q8_0", demo_models.q8_0),
        ("Q4_0", demo_models.q4_0),
        ("Q2_K", demo_models.q2_k),
    ):
        (demo_dir / demo_file_name(type_name)).symlink_to(path)
    # Only the thread count is set, for this shared 2-core machine (see conftest).
    write_preferences(isolated_data_dir, {"models/n_threads": TEST_THREADS})

    window = open_window(isolated_data_dir)
    probe = StallProbe()
    try:
        probe.start()
        started = time.perf_counter()
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
            assert window.state == UiState.LoadingModel
        ready_s = time.perf_counter() - started
        probe.stop()
        report_timing(request, "first start, ready on the demo pair", ready_s, 20.0)
        report_timing(request, "longest UI stall at first start", probe.max_gap_ms / 1000, 0.050)
        assert window.state == UiState.Idle
        loaded = window.models.loaded
        assert loaded is not None and loaded.target is not None
        assert Path(loaded.target.path).name == demo_file_name("F32")
        assert loaded.draft.path is not None
        assert Path(loaded.draft.path).name == demo_models.q4_1.name
        assert window.controls.target_combo.currentText().endswith(Path(demo_file_name("F32")).stem)
        assert window.controls.draft_combo.currentText().endswith(demo_models.q4_1.stem)
        assert send(qtbot, window, "Hello!")["mode"] == "hybrid"
    finally:
        close_window(window)


def test_conversations_stats_and_preferences_survive_a_restart(
    qtbot: QtBot, demo_models: Any, isolated_data_dir: Path
) -> None:
    write_preferences(isolated_data_dir, demo_preferences(demo_models))
    window = open_window(isolated_data_dir)
    try:
        start_and_wait(window)
        first = send(qtbot, window, "Name three colours.")
        window.set_speculation(False)
        second = send(qtbot, window, "Name three animals.")
        conversation = window.conversation_id
        assert conversation is not None
        window.rename_conversation(conversation, "Colours and animals")
        window.controls.gamma.setValue(0)  # Auto
        shown = [m.text for m in window.view.messages]
    finally:
        close_window(window)

    again = open_window(isolated_data_dir)
    try:
        assert again.conversations.titles() == ["Colours and animals"]
        assert again.controls.gamma.value() == 0 and again.controls.gamma.text() == "Auto"
        assert not again.controls.speculation.isChecked()
        again.conversations.list.setCurrentRow(0)  # what a click does
        assert again.conversation_id == conversation
        messages = again.view.messages
        assert [m.text for m in messages] == shown
        assert [m.stats_line for m in messages if m.role == "assistant"] == [
            first["summary"],
            second["summary"],
        ]
        assert "mode hybrid" in messages[1].stats_line and "mode plain" in messages[3].stats_line
        # Accepted draft tokens stay highlighted after the restart.
        assert messages[1].segments and any(flag for _, flag in messages[1].segments)
        stored = again.store.messages(conversation)
        assert stored[1].stats is not None and stored[1].stats["acceptance_rate"] is not None
        assert stored[3].stats is not None and stored[3].stats["mode"] == "plain"
    finally:
        close_window(again)


def test_closing_the_window_mid_reply_shuts_down_cleanly(
    qtbot: QtBot, demo_models: Any, isolated_data_dir: Path, request: pytest.FixtureRequest
) -> None:
    write_preferences(
        isolated_data_dir, demo_preferences(demo_models, **{"generation/max_tokens": 2000})
    )
    window = open_window(isolated_data_dir)
    start_and_wait(window)
    window.prompt.setPlainText(STORY)
    window.send()
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 30, timeout=TIMEOUT_MS)
    started = time.perf_counter()
    window.close()
    closing_s = time.perf_counter() - started
    assert window.is_shut_down()
    assert window.host.engine_thread.isFinished()
    report_timing(request, "closing mid-reply", closing_s, 5.0)
    # The stopped reply was kept, as Stop would have kept it.
    store = ConversationStore(isolated_data_dir / "conversations.sqlite3")
    conversation = store.conversations()[0]
    messages = store.messages(conversation.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].stats is not None and messages[1].stats["finish_reason"] == "cancelled"
    assert len(messages[1].content) > 30
    store.close()
    # The window's size and layout were saved for next time.
    prefs = QSettings(str(isolated_data_dir / "settings.ini"), QSettings.Format.IniFormat)
    assert prefs.value("window/geometry")
    window.deleteLater()


def _read_lines(stream: Any, lines: list[str], event: threading.Event) -> None:
    for line in stream:
        lines.append(line.strip())
        if line.strip() == "STREAMING":
            event.set()
    event.set()


def test_sigkill_mid_reply_loses_nothing_before_that_reply(
    demo_models: Any, isolated_data_dir: Path
) -> None:
    write_preferences(
        isolated_data_dir, demo_preferences(demo_models, **{"generation/max_tokens": 16})
    )
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("kill_child.py")), str(isolated_data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )
    lines: list[str] = []
    streaming = threading.Event()
    reader = threading.Thread(
        target=_read_lines, args=(child.stdout, lines, streaming), daemon=True
    )
    reader.start()
    helpers: list[psutil.Process] = []
    try:
        assert streaming.wait(120), f"the child never streamed its second reply: {lines}"
        assert lines[-1] == "STREAMING", lines
        helpers = psutil.Process(child.pid).children(recursive=True)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
        # Its helper processes notice and leave too; nothing stray is left running.
        _gone, alive = psutil.wait_procs(helpers, timeout=10)
        assert not alive, alive
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for process in helpers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        reader.join(10)
        assert child.stdout is not None
        child.stdout.close()
    assert lines[:2] == ["READY", "FIRST_DONE"]

    path = isolated_data_dir / "conversations.sqlite3"
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = ConversationStore(path)
    (conversation,) = store.conversations()
    messages = store.messages(conversation.id)
    # Everything before the killed reply: the first exchange with its stats, and the question.
    assert [(m.role, m.content) for m in messages][::2] == [
        ("user", "Name three colours."),
        ("user", STORY),
    ]
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[1].content and messages[1].stats is not None
    assert messages[1].stats["mode"] == "hybrid"
    store.close()
