"""The chat and the Local server taking turns, as a user meets it: the answered count matches
/health, and a message sent while a request runs goes as soon as the request ends."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.job_queue import JobRunner
from tests.helpers.fake_window import TIMEOUT_MS
from tests.unit.ui.window.test_local_server_switch import free_port, in_thread, post
from ui.window.main_window import MainWindow, UiState


def _health(url: str) -> dict[str, Any]:
    base = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/health", timeout=30) as response:
        return dict(json.loads(response.read()))


def test_the_answered_count_matches_health(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server counts a request after its last event has gone out; on a busy machine the
    # window hears of the end first. Made certain here by a pause before the count.
    record = JobRunner._record

    def late_record(self: JobRunner, outcome: str, ticket: Any) -> None:
        time.sleep(0.3)
        record(self, outcome, ticket)

    monkeypatch.setattr(JobRunner, "_record", late_record)
    panel = window.server_panel
    panel.port.setValue(free_port())
    panel.switch.setChecked(True)
    url = window.server_switch.server.url
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}
    for expected in (1, 2):
        status, _answer = in_thread(qtbot, lambda: post(f"{url}/chat/completions", body))
        assert status == 200
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        qtbot.wait(500)  # the late count has landed
        served = in_thread(qtbot, lambda: _health(url))["requests"]["served"]
        assert served == expected
        assert f"{served} answered" in panel.note.text()
    panel.switch.setChecked(False)


def test_a_message_sent_while_a_request_runs_goes_when_it_ends(
    window: MainWindow, qtbot: QtBot
) -> None:
    panel = window.server_panel
    panel.port.setValue(free_port())
    panel.switch.setChecked(True)
    url = window.server_switch.server.url
    body = {"messages": [{"role": "user", "content": "A long answer"}], "max_tokens": 2000}
    thread = threading.Thread(target=lambda: post(f"{url}/chat/completions", body), daemon=True)
    thread.start()
    qtbot.waitUntil(lambda: window.state == UiState.Serving, timeout=TIMEOUT_MS)
    window.prompt.setPlainText("My question, typed meanwhile")
    assert window.send_button.isEnabled()
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        assert window.state == UiState.Serving  # held, not refused
    thread.join(timeout=30)
    assert window.conversation_id is not None
    saved = window.store.messages(window.conversation_id)
    assert [m.content for m in saved if m.role == "user"] == ["My question, typed meanwhile"]
    assert window.prompt.toPlainText() == ""
    panel.switch.setChecked(False)


def test_the_servers_note_is_not_cut_when_first_switched_on(
    window: MainWindow, qtbot: QtBot
) -> None:
    panel = window.server_panel
    panel.port.setValue(free_port())
    panel.switch.setChecked(True)
    qtbot.wait(100)  # the panel's layout settles
    for label in (panel.url, panel.note):
        assert label.isVisible() and label.text()
        needed = (
            label.heightForWidth(label.width()) if label.wordWrap() else label.sizeHint().height()
        )
        assert label.height() >= needed, (label.objectName(), label.height(), needed)
    assert "Requests take turns" in panel.note.text()
    panel.switch.setChecked(False)
    assert not panel.note.isVisible()
