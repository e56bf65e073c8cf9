"""A regenerated reply cut by something other than the user's Stop (the window closing, the
model failing after some text) does not take the complete earlier reply's place in the chat."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.store import ConversationStore
from tests.helpers.fake_model import FakeModel
from tests.helpers.qt_window import close_window
from tests.unit.ui.window.conftest import TIMEOUT_MS, open_with_one_reply
from ui.window.main_window import UiState


def test_closing_the_window_mid_regenerate_keeps_the_earlier_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    window, conversation = open_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.1, max_tokens=8
    )
    closed = False
    try:
        before = window.store.messages(conversation)
        window.settings.set("generation/max_tokens", 400)
        window.regenerate()
        qtbot.waitUntil(lambda: bool(window.view.streaming_text), timeout=TIMEOUT_MS)
        close_window(window)
        closed = True
    finally:
        if not closed:
            close_window(window)
    store = ConversationStore(isolated_data_dir / "conversations.sqlite3")
    try:
        assert store.messages(conversation) == before
    finally:
        store.close()


def test_a_regenerate_that_fails_after_some_text_keeps_the_earlier_reply(
    qtbot: QtBot,
    isolated_data_dir: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    window, conversation = open_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.05, max_tokens=8
    )
    try:
        before = window.store.messages(conversation)
        shown = window.view.messages
        window.settings.set("generation/max_tokens", 400)
        errors: list[str] = []
        window.errorShown.connect(errors.append)
        window.regenerate()
        qtbot.waitUntil(lambda: bool(window.view.streaming_text), timeout=TIMEOUT_MS)

        def worker_gone(self: FakeModel, history: Sequence[int], n_logits: int) -> None:
            raise OSError("the worker stopped answering")

        with qtbot.waitSignal(window.replyFailed, timeout=TIMEOUT_MS):
            monkeypatch.setattr(FakeModel, "feed", worker_gone)
        monkeypatch.undo()
        qtbot.waitUntil(lambda: window.state != UiState.Generating, timeout=TIMEOUT_MS)
        assert window.store.messages(conversation) == before
        assert window.view.messages == shown
        assert errors and "the earlier reply is kept" in errors[-1]
    finally:
        close_window(window)


def test_closing_right_after_the_users_stop_keeps_the_stopped_reply_as_meant(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    """The user's Stop keeps what the regenerated reply wrote (it replaces the earlier one); a
    close that comes before that reply's end has arrived must not turn it into a cut by the
    window."""
    window, conversation = open_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=8
    )
    closed = False
    try:
        before = window.store.messages(conversation)
        window.settings.set("generation/max_tokens", 400)
        window.regenerate()
        qtbot.waitUntil(lambda: bool(window.view.streaming_text), timeout=TIMEOUT_MS)
        window.stop()
        close_window(window)  # the stopped reply's end arrives during the close
        closed = True
    finally:
        if not closed:
            close_window(window)
    store = ConversationStore(isolated_data_dir / "conversations.sqlite3")
    try:
        after = store.messages(conversation)
    finally:
        store.close()
    assert [m.role for m in after] == ["user", "assistant"]
    assert after[-1].id != before[-1].id and after[-1].content.strip()
