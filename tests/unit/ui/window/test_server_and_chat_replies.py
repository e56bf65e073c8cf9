"""A Local server request beside the chat's own replies, as a user meets it: a message held
behind a waiting request goes after it while the window says it serves; a request cut by
switching the server off is not called answered; Metrics and Insight describe the same reply."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.qt_window import close_window, send
from tests.unit.ui.window.test_local_server_switch import free_port, in_thread, post
from ui.window.main_window import MainWindow, UiState


@pytest.fixture
def slow_window(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> Iterator[MainWindow]:
    """Replies long enough to act while one streams."""
    window = open_fake_window(
        isolated_data_dir, files, model_step_s=0.01, **{"generation/max_tokens": 150}
    )
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.start()
    yield window
    close_window(window)


def _switch_on(window: MainWindow) -> str:
    window.server_panel.port.setValue(free_port())
    window.server_panel.switch.setChecked(True)
    return window.server_switch.server.url


def _post_in_background(url: str, body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    box: list[tuple[int, dict[str, Any]]] = []
    thread = threading.Thread(
        target=lambda: box.append(post(f"{url}/chat/completions", body)), daemon=True
    )
    thread.start()
    return box


def _request_behind_a_streaming_reply(
    qtbot: QtBot, window: MainWindow
) -> list[tuple[int, dict[str, Any]]]:
    """A chat reply streaming, and a server request waiting in the queue behind it; the list
    gets the request's status and answer once it ends."""
    url = _switch_on(window)
    window.prompt.setPlainText("Tell me a story")
    window.send()
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 5, timeout=TIMEOUT_MS)
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 40}
    answered = _post_in_background(url, body)
    owner = window.server_switch.server.owner
    assert owner is not None
    qtbot.waitUntil(lambda: owner.health()["queued"] == 1, timeout=TIMEOUT_MS)
    return answered


def test_stop_then_send_with_a_request_waiting_serves_it_before_the_held_message(
    slow_window: MainWindow, qtbot: QtBot
) -> None:
    window = slow_window
    answered = _request_behind_a_streaming_reply(qtbot, window)

    states: list[UiState] = []
    window.stateChanged.connect(states.append)
    window.stop()
    window.prompt.setPlainText("Second question")
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):  # the stopped reply
        window.send()
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):  # the held message's
        pass
    assert answered and answered[0][0] == 200
    # Never Generating while the request ran: the held message went once it had ended.
    assert states == [
        UiState.Stopping,
        UiState.Idle,
        UiState.Serving,
        UiState.Idle,
        UiState.Generating,
        UiState.Idle,
    ]
    assert window.conversation_id is not None
    users = [m.content for m in window.store.messages(window.conversation_id) if m.role == "user"]
    assert users == ["Tell me a story", "Second question"]
    window.server_panel.switch.setChecked(False)


def test_regenerate_with_a_request_waiting_does_not_start_behind_it(
    slow_window: MainWindow, qtbot: QtBot
) -> None:
    window = slow_window
    answered = _request_behind_a_streaming_reply(qtbot, window)
    states: list[UiState] = []
    window.stateChanged.connect(states.append)
    pressed: list[tuple[UiState, str]] = []

    def regenerate_as_the_stop_lands(_stats: object) -> None:
        # Idle, with the request about to take the engine: the moment a user's click lands.
        if not pressed:
            window.regenerate()
            pressed.append((window.state, window.statusBar().currentMessage()))

    window.replyFinished.connect(regenerate_as_the_stop_lands)
    window.stop()
    qtbot.waitUntil(lambda: bool(answered) and window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert pressed and pressed[0][0] == UiState.Idle and "Regenerate again" in pressed[0][1]
    assert UiState.Generating not in states
    window.server_panel.switch.setChecked(False)


def test_a_request_cut_by_switching_the_server_off_is_not_called_answered(
    slow_window: MainWindow, qtbot: QtBot
) -> None:
    window = slow_window
    url = _switch_on(window)
    messages: list[str] = []
    window.server_switch.statusMessage.connect(messages.append)
    body = {"messages": [{"role": "user", "content": "A long answer"}], "max_tokens": 400}
    answered = _post_in_background(url, body)
    qtbot.waitUntil(lambda: window.state == UiState.Serving, timeout=TIMEOUT_MS)
    qtbot.wait(200)
    window.server_panel.switch.setChecked(False)
    qtbot.waitUntil(lambda: bool(answered) and window.state == UiState.Idle, timeout=TIMEOUT_MS)
    status, answer = answered[0]
    assert status == 503 and answer["error"]["code"] == "cancelled", answer
    assert len(messages) == 1 and "answered" not in messages[0].lower()
    assert "stopped before it ended" in messages[0]


def test_after_a_request_insight_describes_the_same_reply_as_metrics(
    window: MainWindow, qtbot: QtBot
) -> None:
    send(qtbot, window, "Hello")
    chat_rounds = window.insight.insight.rounds if window.insight.insight else None
    url = _switch_on(window)
    ended: list[bool] = []
    window.server_switch.servingChanged.connect(lambda serving: ended.append(not serving))
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5}
    status, answer = in_thread(qtbot, lambda: post(f"{url}/chat/completions", body))
    assert status == 200, answer
    qtbot.waitUntil(lambda: any(ended), timeout=TIMEOUT_MS)  # the window heard the end
    insight = window.insight.insight
    assert insight is not None and insight.rounds != chat_rounds
    assert insight.rounds == answer["speculation"]["rounds"]
    assert window.insight.table.rowCount() == answer["speculation"]["rounds"]
    window.server_panel.switch.setChecked(False)
