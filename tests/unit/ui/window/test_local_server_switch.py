"""The window's Local server: the OpenAI API answered by the window's own loaded models through
its engine worker, with the chat waiting while a request runs. Only 127.0.0.1 is contacted."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.helpers.qt_window import send
from ui.window.main_window import MainWindow, UiState


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(url: str, body: dict[str, Any], key: str = "") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {key}"} if key else {}),
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def in_thread(qtbot: QtBot, call: Any) -> Any:
    """Run a blocking HTTP call off the UI thread while Qt keeps delivering signals."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    qtbot.waitUntil(lambda: bool(box), timeout=TIMEOUT_MS)
    return box[0]


def test_the_switch_serves_the_loaded_models_and_the_chat_waits_its_turn(
    window: MainWindow, qtbot: QtBot
) -> None:
    panel = window.server_panel
    panel.port.setValue(free_port())
    panel.api_key.setText("secret")
    panel.switch.setChecked(True)
    url = window.server_switch.server.url
    assert url.startswith("http://127.0.0.1:") and url in panel.url.text()
    panel.copy_button.click()
    assert QGuiApplication.clipboard().text() == url

    states: list[UiState] = []
    window.stateChanged.connect(states.append)
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 12}
    status, answer = in_thread(qtbot, lambda: post(f"{url}/chat/completions", body, "secret"))
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"]
    assert answer["timings"]["draft_n"] > 0  # the window's draft speculated for it
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert UiState.Serving in states  # the chat was held while the request ran
    assert "answered" in panel.note.text()

    # The chat writes the same words for the same message (it goes on longer: its reply
    # length is 24 tokens, the request's 12): one engine, one set of models.
    send(qtbot, window, "Hello")
    assert window.view.messages[-1].text.startswith(answer["choices"][0]["message"]["content"])

    status, refused = in_thread(qtbot, lambda: post(f"{url}/chat/completions", body, "wrong"))
    assert status == 401 and refused["error"]["code"]

    panel.switch.setChecked(False)
    assert window.server_switch.server.url == "" and panel.url.text() == "Off"
    refused_after = in_thread(qtbot, lambda: _connects(url))
    assert refused_after is False


def test_a_taken_port_is_said_in_words(window: MainWindow, qtbot: QtBot) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        window.server_panel.port.setValue(int(taken.getsockname()[1]))
        with qtbot.waitSignal(window.errorShown, timeout=TIMEOUT_MS) as shown:
            window.server_panel.switch.setChecked(True)
    assert "local server did not start" in shown.args[0]
    assert not window.server_panel.switch.isChecked()


def _connects(url: str) -> bool:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, int(port))) == 0
