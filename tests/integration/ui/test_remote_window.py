"""The window with its target on a real `specchat worker` on 127.0.0.1: it loads there, shows
the worker's memory, replies as it does locally, and survives the worker dying mid-reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.llama import rpc
from tests.helpers.qt_window import (
    REPLY_TIMEOUT_MS,
    TEST_THREADS,
    close_window,
    open_window,
    send,
    start_and_wait,
    write_preferences,
)
from tests.helpers.rpc_workers import running_worker
from ui.window.main_window import UiState

pytestmark = pytest.mark.model

PROMPT = "Name three colours."


def _reply_text(window: Any) -> str:
    return str(window.view.messages[-1].text)


def test_a_worker_holds_the_target_and_its_death_mid_reply_costs_only_that_reply(
    demo_models: Any, isolated_data_dir: Path, qtbot: QtBot
) -> None:
    assert rpc.supports_rpc(), f"llama.cpp was built without RPC: {rpc.REBUILD_COMMAND}"
    with running_worker() as worker:
        write_preferences(
            isolated_data_dir,
            {
                "models/target": str(demo_models.f32),
                "models/draft": "none",  # one model: CPU is scarce, and plain greedy is exact
                "models/n_threads": TEST_THREADS,
                "models/n_ctx": 512,
                "models/target_rpc": worker.endpoint,
                "generation/max_tokens": 12,
            },
        )
        window = open_window(isolated_data_dir)
        try:
            start_and_wait(window)
            loaded = window.models.loaded
            assert loaded is not None and loaded.remote
            assert loaded.target is not None and loaded.target.rpc_servers == (worker.endpoint,)
            assert [w.endpoint for w in loaded.workers] == [worker.endpoint]
            assert loaded.workers[0].total_bytes > 0
            assert loaded.remote_free_bytes == loaded.workers[0].free_bytes
            assert worker.endpoint in window.metrics.workers_memory.text()

            cpu_before = worker.cpu_seconds()
            send(qtbot, window, PROMPT)
            remote_text = _reply_text(window)
            assert remote_text.strip() and worker.cpu_seconds() > cpu_before

            # The worker dies mid-reply: one message, the tokens so far kept, no model held.
            window.new_chat()
            window.settings.set("generation/max_tokens", 400)
            errors: list[str] = []
            window.errorShown.connect(errors.append)
            window.prompt.setPlainText("Tell me a long story about a lighthouse.")
            with qtbot.waitSignal(window.replyFailed, timeout=REPLY_TIMEOUT_MS):
                qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
                qtbot.waitUntil(lambda: bool(window.view.streaming_text), timeout=60_000)
                worker.kill()
            partial = window.view.messages[-1]
            assert partial.role == "assistant" and partial.text.strip()
            assert "stopped answering" in partial.note
            assert errors == [partial.note]
            qtbot.waitUntil(lambda: window.state == UiState.NoModel, timeout=10_000)

            # Back to this machine: the same model loads locally and replies as the worker did.
            with qtbot.waitSignal(window.modelsLoaded, timeout=REPLY_TIMEOUT_MS) as reloaded:
                window.settings_panel.remote_workers.target.setText("")
                window.settings_panel.remote_workers.target.editingFinished.emit()
            assert reloaded.args[0].target is not None and not reloaded.args[0].remote
            qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=10_000)
            window.settings.set("generation/max_tokens", 12)
            window.new_chat()
            send(qtbot, window, PROMPT)
            assert _reply_text(window) == remote_text
        finally:
            close_window(window)
