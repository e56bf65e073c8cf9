"""Stop pressed before the first token: nothing empty is saved, no stats line of zeros, and
the headline keeps telling the truth."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.runtime import Runtime
from app.errors import Cancelled
from tests.helpers.fake_window import TIMEOUT_MS, another_store, fake_window_with_one_reply
from ui.window.main_window import UiState
from ui.window.reply_flow import STOPPED_BEFORE_TEXT


def test_stop_before_the_first_token_saves_nothing_and_keeps_the_headline(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, _conversation):
        headline = window.controls.headline.text()
        assert "without a draft" in headline or "As fast" in headline or "×" in headline
        window.prompt.setPlainText("Stop me at once")
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert window.conversation_id is not None
        saved = window.store.messages(window.conversation_id)
        assert [m.role for m in saved] == ["user", "assistant", "user"]
        last = window.view.messages[-1]
        assert last.note == STOPPED_BEFORE_TEXT and last.stats_line == ""
        assert "0.0 tok/s" not in window.view.toPlainText()
        assert window.controls.headline.text() == headline

        # Another target: the headline spoke of the old one.
        with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
            window.choose_target(str(files["target2"]))
        assert window.controls.headline.text() == ""


def test_a_regenerate_stopped_before_the_first_token_keeps_the_earlier_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, _conversation):
        assert window.conversation_id is not None
        before = window.store.messages(window.conversation_id)
        shown = window.view.messages
        window.regenerate()
        assert window.state == UiState.Generating
        # Killed now, the chat would still hold the earlier reply, and only that one.
        assert window.store.messages(window.conversation_id) == before
        window.stop()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert window.store.messages(window.conversation_id) == before
        assert window.view.messages == shown
        assert window.regenerate_button.isEnabled()

        # Regenerate works again, and the new reply replaces the earlier one.
        with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
            window.regenerate()
        after = window.store.messages(window.conversation_id)
        assert [m.role for m in after] == ["user", "assistant"]
        assert after[0] == before[0] and after[-1].id != before[-1].id
        assert [m.text for m in window.view.messages] == [m.content for m in after]


def test_a_regenerate_stopped_early_shows_no_reply_another_window_deleted_meanwhile(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.3, max_tokens=6
    ) as (window, conversation):
        window.regenerate()
        with another_store(isolated_data_dir) as other:  # a second window's delete
            other.delete_message(other.messages(conversation)[-1].id)
        window.stop()
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert [m.role for m in window.store.messages(conversation)] == ["user"]
        assert [m.role for m in window.view.messages] == ["user"]


def test_a_stop_while_the_chat_template_renders_reads_as_stopped_not_failed(
    qtbot: QtBot,
    isolated_data_dir: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with fake_window_with_one_reply(
        qtbot, isolated_data_dir, files, model_step_s=0.01, max_tokens=6
    ) as (window, conversation):
        before = window.store.messages(conversation)
        errors: list[str] = []
        window.errorShown.connect(errors.append)

        def stopped(*_args: object, **_kwargs: object) -> list[int]:
            raise Cancelled("stopped while the chat template was rendering")

        monkeypatch.setattr(Runtime, "chat_prompt", stopped)
        with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
            window.regenerate()
        assert finished.args[0]["finish_reason"] == "cancelled"
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        assert errors == []
        assert window.store.messages(conversation) == before
        assert window.view.messages[-1].text == before[-1].content
