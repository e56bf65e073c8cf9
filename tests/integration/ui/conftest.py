"""Fixtures for the window tests on the real demo models: one window per module with the demo
pair loaded, and per test that window on a new chat."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from tests.helpers.qt_window import (
    REPLY_TIMEOUT_MS,
    close_window,
    demo_preferences,
    open_window,
    start_and_wait,
    write_preferences,
)
from ui.window.main_window import MainWindow, UiState


@pytest.fixture(scope="module")
def chat(demo_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MainWindow]:
    """One window per module with the demo pair loaded (loading per test would cost minutes)."""
    data_dir = tmp_path_factory.mktemp("chat-window")
    # Module fixtures run before the per-test data folder is set: point anything that still
    # asks app.paths at this module's folder, never at the user's real one.
    previous = os.environ.get("SPECCHAT_DATA_DIR")
    os.environ["SPECCHAT_DATA_DIR"] = str(data_dir)
    write_preferences(data_dir, demo_preferences(demo_models))
    window = open_window(data_dir)
    try:
        start_and_wait(window)
        yield window
    finally:
        close_window(window)
        if previous is None:
            os.environ.pop("SPECCHAT_DATA_DIR", None)
        else:
            os.environ["SPECCHAT_DATA_DIR"] = previous


@pytest.fixture
def window(chat: MainWindow, qtbot: QtBot) -> Iterator[MainWindow]:
    """The module's shared window, on a new chat with speculation on and short replies;
    a reply still running at the end of a test is stopped so the next test starts idle."""
    chat.new_chat()
    chat.set_speculation(True)
    chat.settings.set("generation/max_tokens", 32)
    yield chat
    if chat.state in (UiState.Generating, UiState.Stopping):
        chat.stop()
        qtbot.waitUntil(lambda: chat.state == UiState.Idle, timeout=REPLY_TIMEOUT_MS)
