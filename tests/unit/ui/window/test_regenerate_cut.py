"""A regenerated reply cut by something other than the user's Stop (the window closing, the
model failing after some text) does not take the complete earlier reply's place in the chat."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.helpers.fake_model import FakeModel
from tests.helpers.fake_window import TIMEOUT_MS, another_store, fake_window_with_one_reply
from tests.helpers.qt_window import close_window
from ui.window.main_window import MainWindow, UiState


def regenerate_a_long_reply(qtbot: QtBot, window: MainWindow) -> None:
    """Regenerate with room for a long reply, and wait for its first text to show."""
    window.settings.set("generation/max_tokens", 400)
    window.regenerate()
    qtbot.waitUntil(lambda: bool(window.view.streaming_text), timeout=TIMEOUT_MS)


def test_closing_the_window_mid_regenerate_keeps_the_earlier_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.1, max_tokens=8
    ) as (window, conversation):
        before = window.store.messages(conversation)
        regenerate_a_long_reply(qtbot, window)
        close_window(window)
    with another_store(isolated_data_dir) as store:
        assert store.messages(conversation) == before


def test_a_regenerate_that_fails_after_some_text_keeps_the_earlier_reply(
    qtbot: QtBot,
    isolated_data_dir: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.05, max_tokens=8
    ) as (window, conversation):
        before = window.store.messages(conversation)
        shown = window.view.messages
        errors: list[str] = []
        window.errorShown.connect(errors.append)
        regenerate_a_long_reply(qtbot, window)

        def worker_gone(self: FakeModel, history: Sequence[int], n_logits: int) -> None:
            raise OSError("the worker stopped answering")

        with qtbot.waitSignal(window.replyFailed, timeout=TIMEOUT_MS):
            monkeypatch.setattr(FakeModel, "feed", worker_gone)
        monkeypatch.undo()
        qtbot.waitUntil(lambda: window.state != UiState.Generating, timeout=TIMEOUT_MS)
        assert window.store.messages(conversation) == before
        assert window.view.messages == shown
        assert errors and "the earlier reply is kept" in errors[-1]


def test_closing_right_after_the_users_stop_keeps_the_stopped_reply_as_meant(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    """The user's Stop keeps what the regenerated reply wrote (it replaces the earlier one); a
    close that comes before that reply's end has arrived must not turn it into a cut by the
    window."""
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=8
    ) as (window, conversation):
        before = window.store.messages(conversation)
        regenerate_a_long_reply(qtbot, window)
        window.stop()
        close_window(window)  # the stopped reply's end arrives during the close
    with another_store(isolated_data_dir) as store:
        after = store.messages(conversation)
    assert [m.role for m in after] == ["user", "assistant"]
    assert after[-1].id != before[-1].id and after[-1].content.strip()
