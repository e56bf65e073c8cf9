"""The window's Local server answers as the window is set up now, not as it was when switched
on: the loaded target names the model and its context, and the Speculation switch, γ and reply
length are the defaults of requests that leave them out."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS
from tests.unit.ui.window.test_local_server_switch import free_port, in_thread, post
from ui.settings import DRAFT_NONE
from ui.window.main_window import MainWindow, UiState

BODY = {"messages": [{"role": "user", "content": "Hello"}]}


def _switch_on(window: MainWindow) -> str:
    window.server_panel.port.setValue(free_port())
    window.server_panel.switch.setChecked(True)
    return window.server_switch.server.url


def _ask(window: MainWindow, qtbot: QtBot, url: str, **fields: Any) -> dict[str, Any]:
    status, answer = in_thread(qtbot, lambda: post(f"{url}/chat/completions", BODY | fields))
    assert status == 200, answer
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    return dict(answer)


def _models(qtbot: QtBot, url: str) -> dict[str, Any]:
    def read() -> dict[str, Any]:
        with urllib.request.urlopen(f"{url}/models", timeout=30) as response:
            return dict(json.loads(response.read()))

    [model] = in_thread(qtbot, read)["data"]
    return dict(model)


def test_the_server_names_the_target_the_window_loaded_after_it_was_switched_on(
    window: MainWindow, qtbot: QtBot, files: dict[str, Any]
) -> None:
    url = _switch_on(window)
    assert _models(qtbot, url)["id"] == "target"
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        window.choose_target(str(files["target2"]))
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert _models(qtbot, url)["id"] == "second-target"
    assert _ask(window, qtbot, url, max_tokens=4)["model"] == "second-target"
    window.server_panel.switch.setChecked(False)


def test_the_server_advertises_the_context_the_window_loaded_after_it_was_switched_on(
    window: MainWindow, qtbot: QtBot
) -> None:
    url = _switch_on(window)
    assert _models(qtbot, url)["meta"]["n_ctx"] != 512
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        window.settings_panel.context.setValue(512)
    assert _models(qtbot, url)["meta"]["n_ctx"] == 512
    window.server_panel.switch.setChecked(False)


def test_speculation_switched_off_in_the_window_stops_it_for_requests(
    window: MainWindow, qtbot: QtBot
) -> None:
    url = _switch_on(window)
    assert _ask(window, qtbot, url, max_tokens=12)["timings"]["draft_n"] > 0
    window.set_speculation(False)
    answer = _ask(window, qtbot, url, max_tokens=12)
    assert answer["timings"]["draft_n"] == 0 and answer["speculation"]["n_max"] == 0
    # A request that asks for speculation still gets it: the switch is a default only.
    asked = _ask(window, qtbot, url, max_tokens=12, speculative={"n_max": 3})
    assert asked["timings"]["draft_n"] > 0
    window.server_panel.switch.setChecked(False)


def test_with_no_draft_a_request_asking_for_speculation_is_told_it_ran_plain(
    window: MainWindow, qtbot: QtBot
) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_draft(DRAFT_NONE)
    url = _switch_on(window)
    answer = _ask(window, qtbot, url, max_tokens=6, speculative={"n_max": 3})
    assert answer["speculation"]["mode"] == "plain"
    assert answer["speculation"]["n_max"] == 0
    assert any("n_max 3" in notice for notice in answer["speculation"]["notices"])
    window.server_panel.switch.setChecked(False)


def test_requests_take_the_gamma_and_reply_length_the_window_has_now(
    window: MainWindow, qtbot: QtBot
) -> None:
    url = _switch_on(window)
    window.controls.gamma.setValue(2)
    window.settings.set("generation/max_tokens", 7)
    answer = _ask(window, qtbot, url)
    assert answer["speculation"]["n_max"] == 2
    assert answer["usage"]["completion_tokens"] == 7
    window.server_panel.switch.setChecked(False)
