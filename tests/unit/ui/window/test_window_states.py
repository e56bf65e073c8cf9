"""The window's state machine on stand-in models: the real worker thread, Runtime, engine and
signals over tests.helpers.fake_model, so each test takes seconds instead of minutes.

What llama.cpp itself does in the window (real replies, memory, cancelling a real load) is
covered by the end-to-end tests in test_chat_window.py and test_lifecycle.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.helpers.fake_window import TIMEOUT_MS, open_fake_window
from tests.helpers.qt_window import close_window, send
from ui.formatting import percent
from ui.settings import DRAFT_NGRAM, DRAFT_NONE
from ui.widgets.model_controls import NO_DRAFT_LABEL, SPECULATION_LABEL
from ui.window.load_settings import unapplied_note
from ui.window.main_window import MainWindow, UiState


def loaded_paths(window: MainWindow) -> tuple[str | None, str | None]:
    loaded = window.models.loaded
    assert loaded is not None
    return (loaded.target.path if loaded.target else None, loaded.draft.path)


def switched_mid_reply(
    qtbot: QtBot, window: MainWindow, switch: Callable[[], None]
) -> dict[str, Any]:
    """Send a long message, call `switch` once the reply has some text, and return the reply's
    stats once it has finished."""
    window.settings.set("generation/max_tokens", 400)
    window.prompt.setPlainText("Toggle me")
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 40, timeout=TIMEOUT_MS)
        switch()
    return dict(finished.args[0])


def stop_a_long_reply(qtbot: QtBot, window: MainWindow) -> None:
    """Send a message with room for a long reply, and stop the reply once it has some text."""
    window.settings.set("generation/max_tokens", 4000)
    window.prompt.setPlainText("A long one please")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 40, timeout=TIMEOUT_MS)
    window.stop()


def test_buttons_follow_a_reply_from_send_to_finish(window: MainWindow, qtbot: QtBot) -> None:
    assert window.send_button.isEnabled() and not window.stop_button.isEnabled()
    states: list[UiState] = []
    window.stateChanged.connect(states.append)
    stats = send(qtbot, window, "Hello there")
    assert states == [UiState.Generating, UiState.Idle]
    # A draft model drafts with the suffix index beside it.
    assert stats["mode"] == "hybrid" and stats["generated_tokens"] == 24
    # The stand-in draft is wrong at every fourth position, so not everything is accepted.
    assert 0.0 < stats["acceptance_rate"] < 1.0
    assert window.regenerate_button.isEnabled()


def test_stop_keeps_the_partial_reply_and_returns_to_idle(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/max_tokens", 4000)
    window.prompt.setPlainText("A long one please")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    assert window.state == UiState.Generating
    assert window.stop_button.isEnabled() and not window.send_button.isEnabled()
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 40, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        assert window.state == UiState.Stopping
    stats = finished.args[0]
    assert 0 < stats["generated_tokens"] < 4000
    assert window.state == UiState.Idle
    assert window.conversation_id is not None
    saved = window.store.messages(window.conversation_id)
    assert [m.role for m in saved] == ["user", "assistant"] and saved[-1].content


def test_speculation_switched_off_mid_reply_runs_the_rest_plain(
    window: MainWindow, qtbot: QtBot
) -> None:
    stats = switched_mid_reply(qtbot, window, lambda: window.controls.speculation.setChecked(False))
    result = window.flow.last_result
    assert result is not None
    modes = [r.mode for r in result.rounds]
    assert "hybrid" in modes[: len(modes) // 2] and modes[-1] == "plain"
    assert stats["switched"] is True
    assert "speculation switched mid-reply" in stats["summary"]


def test_the_metrics_panel_agrees_with_a_reply_that_switched_speculation_off(
    window: MainWindow, qtbot: QtBot
) -> None:
    def switch_off() -> None:
        window.set_speculation(False)
        assert window.metrics.acceptance.text() == "—"  # no stale figure while it runs plain

    stats = switched_mid_reply(qtbot, window, switch_off)
    assert stats["mode"] == "hybrid" and stats["acceptance_rate"] is not None
    saved = percent(stats["acceptance_rate"])
    assert saved in stats["summary"]
    assert window.metrics.acceptance.text() == saved
    # Switching back while idle changes nothing either: the figures are the reply's.
    window.set_speculation(True)
    assert window.metrics.acceptance.text() == saved


def test_regenerate_at_temperature_zero_writes_a_different_reply(
    window: MainWindow, qtbot: QtBot
) -> None:
    assert window.settings.get_float("generation/temperature") == 0.0
    send(qtbot, window, "Once")
    assert window.conversation_id is not None
    first = window.store.messages(window.conversation_id)
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.regenerate_button, Qt.MouseButton.LeftButton)
    second = window.store.messages(window.conversation_id)
    assert [m.role for m in second] == ["user", "assistant"]
    assert second[-1].content != first[-1].content
    assert "regenerated at temperature 0.7" in finished.args[0]["summary"]


def test_a_new_target_keeps_a_draft_that_suits_it_and_the_old_one_gets_its_draft_back(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_target(str(files["target2"]))
    assert loaded_paths(window) == (str(files["target2"]), str(files["draft"]))
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_draft(DRAFT_NGRAM)
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_target(str(files["target"]))
    # The draft last used with this target, not the prompt lookup chosen for the other one.
    assert loaded_paths(window) == (str(files["target"]), str(files["draft"]))
    assert window.settings.get_str("models/target") == str(files["target"])


def test_a_target_no_draft_model_suits_drafts_from_the_chat_history(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.models.add_files([str(files["other"])])
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_target(str(files["other"]))
    loaded = window.models.loaded
    assert loaded is not None and loaded.target is not None
    assert loaded.target.path == str(files["other"])
    assert loaded.draft.kind == "ngram"  # speculation stays on, with a drafter that suits
    assert window.controls.speculation.text() == SPECULATION_LABEL


def test_a_file_of_another_vocabulary_is_added_without_replacing_the_target(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.models.add_files([str(files["other"])])
    assert loaded_paths(window) == (str(files["target"]), str(files["draft"]))
    assert "choose it under Target" in window.statusBar().currentMessage()
    assert str(files["other"]) in window.settings.get_list("models/extra_files")
    assert window.controls.speculation.text() == SPECULATION_LABEL


def test_the_toggle_says_when_no_draft_is_loaded(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_draft(DRAFT_NONE)
    assert window.controls.speculation.text() == NO_DRAFT_LABEL
    assert send(qtbot, window, "Plain please")["mode"] == "plain"
    with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
        window.choose_draft(str(files["draft"]))
    assert window.controls.speculation.text() == SPECULATION_LABEL


def test_a_target_that_fails_to_load_is_not_remembered(
    window: MainWindow, qtbot: QtBot, files: dict[str, Path]
) -> None:
    with qtbot.waitSignal(window.errorShown, timeout=TIMEOUT_MS) as shown:
        window.choose_target(str(files["broken"]))
    assert "broken" in shown.args[0]
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert loaded_paths(window)[0] == str(files["target"])
    # The next start loads the model that worked, not the one that failed.
    assert window.settings.get_str("models/target") == str(files["target"])


def test_settings_turns_the_chat_history_off_beside_a_draft_model_and_back(
    window: MainWindow, qtbot: QtBot
) -> None:
    toggle = window.settings_panel.with_history
    assert toggle.isChecked()
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS) as loaded:
        toggle.setChecked(False)
    state = loaded.args[0]
    assert state.draft.kind == "model" and not state.draft.with_history
    assert send(qtbot, window, "Hello there")["mode"] == "draft"
    with qtbot.waitSignal(window.modelsLoaded, timeout=TIMEOUT_MS):
        toggle.setChecked(True)
    assert send(qtbot, window, "Hello again")["mode"] == "hybrid"


def test_the_settings_shading_switch_follows_the_view_menus(window: MainWindow) -> None:
    toggle = window.settings_panel.highlight
    assert toggle.isChecked() and window.highlight_action.isChecked()
    window.highlight_action.setChecked(False)
    assert not toggle.isChecked()
    toggle.setChecked(True)
    assert window.highlight_action.isChecked()
    assert window.settings.get_bool("view/highlight_draft")


def test_a_message_sent_while_the_models_load_goes_once_they_are_in(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.settings_panel.with_history.setChecked(False)  # reloads the draft
    assert window.state == UiState.LoadingModel
    window.prompt.setPlainText("Typed while loading")
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
        qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
        assert window.state == UiState.LoadingModel  # held, not dropped
        assert "as soon as the models are loaded" in window.statusBar().currentMessage()
    assert window.conversation_id is not None
    saved = window.store.messages(window.conversation_id)
    assert [m.content for m in saved if m.role == "user"] == ["Typed while loading"]
    assert window.prompt.toPlainText() == ""


def test_a_message_sent_while_a_reply_stops_goes_once_it_has_stopped(
    window: MainWindow, qtbot: QtBot
) -> None:
    stop_a_long_reply(qtbot, window)
    assert window.state == UiState.Stopping
    window.settings.set("generation/max_tokens", 6)
    window.prompt.setPlainText("Second question")
    qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
    assert "as soon as the reply has stopped" in window.statusBar().currentMessage()
    assert window.conversation_id is not None
    conversation = window.conversation_id
    qtbot.waitUntil(lambda: len(window.store.messages(conversation)) == 4, timeout=TIMEOUT_MS)
    saved = window.store.messages(conversation)
    assert [m.role for m in saved] == ["user", "assistant", "user", "assistant"]
    assert saved[2].content == "Second question" and window.prompt.toPlainText() == ""


def test_the_waiting_line_goes_once_nothing_waits_any_more(
    window: MainWindow, qtbot: QtBot
) -> None:
    stop_a_long_reply(qtbot, window)
    window.prompt.setPlainText("Second question")
    qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
    window.prompt.clear()  # the user changed their mind: nothing is sent
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert "as soon as the reply has stopped" not in window.statusBar().currentMessage()


def test_a_setting_changed_during_the_first_load_reloads_the_models_once_it_ends(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    window = open_fake_window(isolated_data_dir, files)
    try:
        window.start()
        assert window.state == UiState.LoadingModel
        window.settings_panel.context.setValue(1024)
        qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
        loaded = window.models.loaded
        assert loaded is not None and loaded.target is not None
        assert loaded.target.n_ctx == 1024
    finally:
        close_window(window)


def test_a_setting_changed_during_a_later_load_applies_before_the_next_reply(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.choose_draft(DRAFT_NGRAM)
    assert window.state == UiState.LoadingModel
    window.settings_panel.context.setValue(1024)
    contexts: list[int] = []

    def note_context(state: UiState) -> None:
        loaded = window.models.loaded
        if state == UiState.Generating and loaded is not None and loaded.target is not None:
            contexts.append(loaded.target.n_ctx)

    window.stateChanged.connect(note_context)
    states: list[UiState] = []
    window.stateChanged.connect(states.append)
    window.prompt.setPlainText("Typed while loading")
    with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
        qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
    assert contexts == [1024]
    # Reloaded before the reply, not after it.
    assert states == [UiState.Idle, UiState.Generating, UiState.Idle]


def test_opening_another_chat_clears_the_metrics_panel(window: MainWindow, qtbot: QtBot) -> None:
    send(qtbot, window, "First chat")
    first = window.conversation_id
    assert first is not None
    window.new_chat()
    send(qtbot, window, "Second chat")
    assert window.metrics.tokens_per_second.text() != "—"
    assert window.insight.insight is not None
    window.open_conversation(first)
    assert window.conversation_id == first
    assert window.metrics.tokens_per_second.text() == "—"
    assert window.metrics.acceptance.text() == "—"
    assert window.insight.insight is None and window.insight.summary.text() == "—"


def test_a_message_of_nothing_visible_is_not_sent(window: MainWindow, qtbot: QtBot) -> None:
    # str.strip() keeps a zero-width space: it was sent, answered, and titled a blank row.
    for invisible in ("\u200b", " \u200b\u200e\u2060 ", "\u0007\n\u2029"):
        window.prompt.setPlainText(invisible)
        window.send()
        assert window.state == UiState.Idle and window.conversation_id is None
    assert window.store.conversations() == []
    stats = send(qtbot, window, "\u200bHello")  # text beside it: sent, and titled by it
    assert stats["generated_tokens"] > 0
    assert [c.title for c in window.store.conversations()] == ["Hello"]


def test_menu_actions_follow_their_buttons_through_a_reply(
    window: MainWindow, qtbot: QtBot
) -> None:
    # File > New chat (Ctrl+N) and Chat > Edit and resend stayed enabled and did nothing
    # while a reply ran; their buttons were greyed out.
    send(qtbot, window, "First")
    twins = {
        window.stop_action: window.stop_button,
        window.regenerate_action: window.regenerate_button,
        window.compare_action: window.compare_button,
    }
    window.settings.set("generation/max_tokens", 4000)
    window.prompt.setPlainText("A long one please")
    qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.view.streaming_text) > 40, timeout=TIMEOUT_MS)
    assert not window.new_chat_action.isEnabled() and not window.edit_last_action.isEnabled()
    assert all(action.isEnabled() == button.isEnabled() for action, button in twins.items())
    assert window.stop_action.isEnabled()
    window.stop()
    qtbot.waitUntil(lambda: window.state == UiState.Idle, timeout=TIMEOUT_MS)
    assert window.new_chat_action.isEnabled() and window.edit_last_action.isEnabled()
    assert all(action.isEnabled() == button.isEnabled() for action, button in twins.items())
    assert not window.stop_action.isEnabled() and window.regenerate_action.isEnabled()


@pytest.mark.parametrize("first", [False, True], ids=["later message", "first message"])
def test_a_message_the_context_cannot_hold_comes_back_to_the_box(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path], first: bool
) -> None:
    # Left in the chat, it failed every later message the same way; taken back from a chat it
    # began, it left that chat in the list with nothing in it.
    window = open_fake_window(isolated_data_dir, files, **{"models/n_ctx": 256})
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        if not first:
            send(qtbot, window, "Hello")
        too_long = "word " * 2000
        errors: list[str] = []
        window.errorShown.connect(errors.append)
        window.prompt.setPlainText(too_long)
        with qtbot.waitSignal(window.replyFailed, timeout=TIMEOUT_MS):
            window.send()
        assert len(errors) == 1 and "context" in errors[0]
        assert window.prompt.toPlainText() == too_long.strip()
        assert "its reply is gone" not in window.statusBar().currentMessage()  # it had none
        chats = window.store.conversations()
        if first:
            assert window.conversation_id is None and chats == []
            assert not window.chats.undo_button.isVisibleTo(window)
        else:
            assert [c.id for c in chats] == [window.conversation_id]
            assert [m.role for m in window.store.messages(chats[0].id)] == ["user", "assistant"]
            # Putting it back would leave the chat stuck again: no Undo; the buttons are drawn
            # for the chat as it is now, whose last reply can be written again.
            assert not window.chats.undo_button.isVisibleTo(window)
            assert window.regenerate_button.isEnabled()
        send(qtbot, window, "Short again")  # the chat goes on, or a new one begins
        chat = window.conversation_id
        assert chat is not None and [c.id for c in window.store.conversations()] == [chat]
        assert len(window.store.messages(chat)) == (2 if first else 4)
    finally:
        close_window(window)


def test_a_long_prompt_shows_how_far_it_has_been_read_before_the_reply(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    # One pass per part of 512 tokens, 0.3 s each: the reply showed "…" for the whole wait.
    window = open_fake_window(isolated_data_dir, files, model_step_s=0.3)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        window.settings.set("generation/max_tokens", 2)
        window.prompt.setPlainText("word " * 3000)
        with qtbot.waitSignal(window.replyFinished, timeout=TIMEOUT_MS):
            window.send()
            qtbot.waitUntil(
                lambda: "Reading the prompt… " in window.view.toPlainText(), timeout=TIMEOUT_MS
            )
        assert "Reading the prompt" not in window.view.toPlainText()
    finally:
        close_window(window)


def test_a_cancelled_reload_says_the_models_keep_their_earlier_settings(
    qtbot: QtBot, isolated_data_dir: Path, files: dict[str, Path]
) -> None:
    window = open_fake_window(isolated_data_dir, files)
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=TIMEOUT_MS):
            window.start()
        loaded = window.models.loaded
        assert loaded is not None and loaded.target is not None
        assert unapplied_note(window.settings, loaded.target) == ""
        # As held after a reload to a larger context was cancelled: Settings asks for more.
        earlier = dataclasses.replace(loaded.target, n_ctx=loaded.target.n_ctx // 2)
        assert "keep their earlier settings" in unapplied_note(window.settings, earlier)
    finally:
        close_window(window)
