"""The chat window on the real engine and the real demo models (F32 target, quantized drafts).

One window is shared by the module (see conftest.chat); tests leave it idle with a fresh chat.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSpinBox
from pytestqt.qtbot import QtBot

from app.engine.model_host import LoadedState
from app.llama.config import DEFAULT_PROMPT_CACHE_MIB
from app.llama.resources import format_bytes
from tests.helpers.qt_window import REPLY_TIMEOUT_MS, StallProbe, send
from tests.helpers.timing import report_timing
from ui.settings import DRAFT_NGRAM
from ui.widgets.model_controls import NGRAM_LABEL
from ui.window.main_window import MainWindow, UiState
from ui.window.wiring import refresh_memory
from ui.workers.requests import GenerateRequest

NUMBER = re.compile(r"\d")
LONG_PROMPT = "Write a long story about a dragon who learns to cook."


def select_draft(qtbot: QtBot, window: MainWindow, value: str) -> None:
    combo = window.controls.draft_combo
    values = [str(combo.itemData(i, Qt.ItemDataRole.UserRole)) for i in range(combo.count())]
    assert value in values, (value, values)
    index = values.index(value)
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        combo.setCurrentIndex(index)
        combo.activated.emit(index)  # what a click on the entry does
    assert window.state == UiState.Idle, window.banner.text


def test_streamed_reply_with_live_metrics(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/max_tokens", 48)
    snapshots: list[dict[str, Any]] = []

    def sample() -> None:
        # Read the labels the user sees, at each refresh while the reply is still streaming.
        if window.state == UiState.Generating:
            snapshots.append(
                {
                    "acceptance": window.metrics.acceptance.text(),
                    "rate": window.metrics.tokens_per_second.text(),
                    "memory": window.metrics.memory.text(),
                    "buttons": (window.send_button.isEnabled(), window.stop_button.isEnabled()),
                    "partial": window.view.streaming_text,
                }
            )

    assert window.send_button.isEnabled() and not window.stop_button.isEnabled()
    window.metrics_timer.timeout.connect(sample)
    try:
        stats = send(qtbot, window, LONG_PROMPT)
    finally:
        window.metrics_timer.timeout.disconnect(sample)

    assert window.metrics_timer.interval() <= 250  # at least four refreshes a second
    assert len(snapshots) >= 2, "the metrics did not refresh several times while streaming"
    assert any(NUMBER.search(s["acceptance"]) and "%" in s["acceptance"] for s in snapshots)
    assert any(NUMBER.search(s["rate"]) and "tok/s" in s["rate"] for s in snapshots)
    assert all("RAM" in s["memory"] for s in snapshots)
    assert all(s["buttons"] == (False, True) for s in snapshots)
    assert window.send_button.isEnabled() and not window.stop_button.isEnabled()
    # Streamed, not dumped at the end: part of the reply was on screen before it finished.
    reply = window.view.messages[-1]
    partial = next(s["partial"] for s in snapshots if s["partial"])
    assert 0 < len(partial) < len(reply.text) and reply.text.startswith(partial.strip()[:5])
    assert stats["mode"] == "hybrid" and stats["generated_tokens"] > 0
    assert stats["summary"] in window.view.toPlainText()
    assert "mode hybrid" in stats["summary"] and "acceptance" in stats["summary"]
    assert NUMBER.search(window.metrics.ttft.text())
    assert NUMBER.search(window.metrics.draft_verify.text())
    assert any(v is not None for v in window.metrics.bars.values)
    assert window.metrics.sparkline.point_count >= 2
    assert "weights" in window.metrics.target_memory.text()
    assert "weights" in window.metrics.draft_memory.text()  # the draft's own cost, separately


def test_speculation_toggle_between_replies(window: MainWindow, qtbot: QtBot) -> None:
    first = send(qtbot, window, "Name three colours.")
    assert first["mode"] == "hybrid" and "mode hybrid" in first["summary"]
    assert NUMBER.search(window.metrics.acceptance.text())

    qtbot.mouseClick(window.controls.speculation, Qt.MouseButton.LeftButton)
    assert not window.controls.speculation.isChecked()
    assert window.metrics.acceptance.text() == "—"  # at once, not after the next reply
    second = send(qtbot, window, "Name three animals.")
    assert second["mode"] == "plain" and "mode plain" in second["summary"]
    assert second["drafted"] == 0
    assert window.metrics.acceptance.text() == "—"

    # Each stored reply keeps the mode that produced it.
    assert window.conversation_id is not None
    replies = [m for m in window.store.messages(window.conversation_id) if m.role == "assistant"]
    assert [m.stats["mode"] for m in replies if m.stats] == ["hybrid", "plain"]
    assert window.settings.get_bool("generation/speculation") is False


def test_speculation_toggle_takes_effect_mid_reply(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/max_tokens", 96)
    window.prompt.setPlainText(LONG_PROMPT)
    with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS):
        window.send()
        qtbot.waitUntil(
            lambda: sum(r.drafted for r in window.flow.live.rounds) > 0, timeout=REPLY_TIMEOUT_MS
        )
        window.set_speculation(False)
        toggled_at = len(window.flow.live.rounds)
    result = window.flow.last_result
    assert result is not None
    after = result.rounds[toggled_at + 2 :]  # allow the round in flight and one queued
    assert any(r.drafted for r in result.rounds[:toggled_at])
    assert after and all(r.drafted == 0 for r in after)
    qtbot.waitUntil(lambda: window.state == UiState.Idle)
    stored = window.store.messages(window.conversation_id or -1)[-1]
    assert stored.stats and stored.stats["switched"] is True
    assert "switched mid-reply" in stored.stats["summary"]


def test_every_draft_in_the_dropdown_can_be_used(
    window: MainWindow, qtbot: QtBot, demo_models: Any
) -> None:
    entries = window.controls.draft_entries()
    usable = [(label, value) for label, value, enabled, _ in entries if enabled]
    model_files = [value for _, value in usable if value.endswith(".gguf")]
    # Sorted by size, sizes shown.
    sizes = [Path(v).stat().st_size for v in model_files]
    assert sizes == sorted(sizes)
    assert all("MiB" in label for label, v in usable if v.endswith(".gguf"))
    assert {Path(v).name for v in model_files} >= {
        p.name for p in (demo_models.q8_0, demo_models.q4_1, demo_models.q4_0, demo_models.q2_k)
    }
    assert NGRAM_LABEL in [label for label, _ in usable]

    for path in model_files:
        select_draft(qtbot, window, path)
        assert window.models.loaded is not None and window.models.loaded.draft.path == path
        assert window.controls.draft_combo.currentData(Qt.ItemDataRole.UserRole) == path
        assert window.models.loaded.memory.draft_weights > 0
        stats = send(qtbot, window, "Say hello.")
        assert stats["mode"] == "hybrid" and stats["draft"] == Path(path).name
        assert stats["drafted"] > 0
    # Back to the demo default for the other tests.
    select_draft(qtbot, window, str(demo_models.q4_1))


def test_chat_history_drafting_works(window: MainWindow, qtbot: QtBot, demo_models: Any) -> None:
    select_draft(qtbot, window, DRAFT_NGRAM)
    assert window.models.loaded is not None and window.models.loaded.draft.kind == "ngram"
    assert window.models.loaded.memory.draft_weights == 0
    assert "chat history" in window.metrics.draft_memory.text()
    text = "the quick brown fox jumps over the lazy dog"
    stats = send(qtbot, window, f"Repeat this sentence exactly three times: {text}. {text}.")
    assert stats["mode"] == "suffix" and "mode suffix" in stats["summary"]
    assert stats["drafted"] > 0 and stats["accepted"] > 0
    select_draft(qtbot, window, str(demo_models.q4_1))


def test_incompatible_file_is_listed_disabled_with_its_reason(
    window: MainWindow, qtbot: QtBot, gemma_model: Path
) -> None:
    extra = window.settings.get_list("models/extra_files")
    window.settings.set("models/extra_files", [*extra, str(gemma_model)])
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
            window.models.refresh_catalog()
        gemma = [e for e in window.controls.draft_entries() if e[1] == str(gemma_model)]
        assert len(gemma) == 1
        _label, _value, enabled, tooltip = gemma[0]
        assert not enabled
        assert tooltip.startswith("Not compatible with the target:")
        assert "vocabulary type differs" in tooltip or "differ" in tooltip
    finally:
        window.settings.set("models/extra_files", extra)


def test_stop_mid_reply_keeps_the_partial_text(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/max_tokens", 400)
    window.prompt.setPlainText(LONG_PROMPT)
    with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS) as done:
        window.send()
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 20, timeout=REPLY_TIMEOUT_MS)
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
        assert not window.stop_button.isEnabled() and not window.send_button.isEnabled()
    stats = done.args[0]
    assert stats["finish_reason"] == "cancelled"
    assert 0 < stats["generated_tokens"] < 400
    stored = window.store.messages(window.conversation_id or -1)[-1]
    assert stored.role == "assistant" and len(stored.content) > 20
    assert stored.content == window.view.messages[-1].text
    assert "stopped" in stored.stats["summary"]  # type: ignore[index]
    assert window.send_button.isEnabled() and not window.stop_button.isEnabled()


def test_escape_stops_and_ctrl_n_starts_a_new_chat(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/max_tokens", 400)
    window.activateWindow()
    window.prompt.setPlainText(LONG_PROMPT)
    with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS) as done:
        qtbot.keyClick(window.prompt, Qt.Key.Key_Return)  # Enter sends
        qtbot.waitUntil(lambda: len(window.view.streaming_text) > 5, timeout=REPLY_TIMEOUT_MS)
        qtbot.keyClick(window.prompt, Qt.Key.Key_Escape)
    assert done.args[0]["finish_reason"] == "cancelled"
    assert window.conversation_id is not None
    qtbot.keyClick(window.prompt, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.conversation_id is None and window.view.messages == []
    window.send_button.setFocus()
    qtbot.keyClick(window.send_button, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(window.prompt.hasFocus)


def test_regenerate_replaces_the_last_reply(window: MainWindow, qtbot: QtBot) -> None:
    window.settings.set("generation/temperature", 0.9)
    window.settings.set("generation/seed", -1)
    try:
        send(qtbot, window, "Tell me a fun fact.")
        conversation = window.conversation_id
        assert conversation is not None
        before = window.store.messages(conversation)
        assert window.regenerate_button.isEnabled()
        with qtbot.waitSignal(window.replyFinished, timeout=REPLY_TIMEOUT_MS):
            qtbot.mouseClick(window.regenerate_button, Qt.MouseButton.LeftButton)
        after = window.store.messages(conversation)
    finally:
        window.settings.set("generation/temperature", 0.0)
    assert [m.role for m in after] == ["user", "assistant"]
    assert after[0].id == before[0].id
    # A new, sampled reply (SQLite may reuse the freed row id, so compare what it says).
    assert after[1].content != before[1].content
    assert after[1].created_at > before[1].created_at
    assert [m.role for m in window.view.messages] == ["user", "assistant"]
    assert window.view.messages[-1].text == after[1].content


@pytest.mark.perf
def test_stall_probe_during_generation(
    window: MainWindow, qtbot: QtBot, request: pytest.FixtureRequest
) -> None:
    window.settings.set("generation/max_tokens", 96)
    probe = StallProbe()
    probe.start()
    stats = send(qtbot, window, LONG_PROMPT)
    probe.stop()
    assert stats["generated_tokens"] > 40
    report_timing(request, "longest UI stall while generating", probe.max_gap_ms / 1000, 0.050)


@pytest.mark.perf
def test_stall_probe_during_model_loading(
    window: MainWindow, qtbot: QtBot, demo_models: Any, request: pytest.FixtureRequest
) -> None:
    probe = StallProbe()
    probe.start()
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        window.choose_target(str(demo_models.q8_0))  # unload F32, load Q8_0 as the target
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        window.choose_target(str(demo_models.f32))
    select_draft(qtbot, window, str(demo_models.q4_1))
    probe.stop()
    assert window.models.loaded is not None and window.models.loaded.target is not None
    assert window.models.loaded.target.path == str(demo_models.f32)
    report_timing(request, "longest UI stall while loading", probe.max_gap_ms / 1000, 0.050)


def test_model_loading_can_be_cancelled(window: MainWindow, qtbot: QtBot, demo_models: Any) -> None:
    progress: list[int] = []
    window.load_bar.valueChanged.connect(progress.append)
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        window.choose_target(str(demo_models.q8_0))
        assert window.state == UiState.LoadingModel and window.load_row.isVisibleTo(window)
        qtbot.mouseClick(window.cancel_load_button, Qt.MouseButton.LeftButton)
    assert "cancelled" in window.statusBar().currentMessage().lower()
    assert not window.banner.text  # a cancel is not an error
    # The previous models are back and usable.
    assert window.models.loaded is not None and window.models.loaded.target is not None
    assert window.models.loaded.target.path == str(demo_models.f32)
    assert window.state == UiState.Idle
    assert send(qtbot, window, "Hi!")["generated_tokens"] > 0
    assert 1000 in progress  # the bar filled while the previous models came back


def test_a_bad_file_from_the_dialog_gives_a_readable_message(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "downloaded-model.gguf"
    bad.write_bytes(b"<html>404 Not Found</html>" * 100)
    monkeypatch.setattr(
        "ui.window.dialog_launcher.QFileDialog.getOpenFileNames", lambda *_a, **_k: ([str(bad)], "")
    )
    with qtbot.waitSignal(window.errorShown, timeout=REPLY_TIMEOUT_MS) as shown:
        qtbot.mouseClick(window.controls.add_button, Qt.MouseButton.LeftButton)
    message = shown.args[0]
    assert message == window.banner.text
    assert str(bad) in message and "not a GGUF file" in message
    assert "Traceback" not in message and "\n" not in message
    assert str(bad) not in window.settings.get_list("models/extra_files")
    # The app keeps working.
    assert window.state == UiState.Idle
    assert send(qtbot, window, "Hi!")["generated_tokens"] > 0


def test_a_good_file_added_is_put_to_use(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, demo_models: Any
) -> None:
    own = tmp_path / "my-draft.gguf"
    own.symlink_to(demo_models.q4_0)
    extra = window.settings.get_list("models/extra_files")
    try:
        with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
            window.models.add_files([str(own)])
        assert window.models.loaded is not None and window.models.loaded.draft.path == str(own)
        assert str(own) in window.settings.get_list("models/extra_files")
    finally:
        window.settings.set("models/extra_files", extra)
        select_draft(qtbot, window, str(demo_models.q4_1))


def test_gamma_auto_system_prompt_and_sampling_reach_the_engine(
    window: MainWindow, qtbot: QtBot
) -> None:
    requests: list[GenerateRequest] = []
    window.host.generateRequested.connect(requests.append)  # emitted on the UI thread
    window.controls.gamma.setValue(0)
    window.settings.set("generation/system_prompt", "You are terse.")
    window.settings_panel.seed.setValue(7)
    window.settings_panel.top_k.setValue(40)
    qtbot.mouseClick(window.settings_panel.exact, Qt.MouseButton.LeftButton)
    try:
        stats = send(qtbot, window, "Name a fruit.")
    finally:
        window.host.generateRequested.disconnect(requests.append)
        window.controls.gamma.setValue(5)
        window.settings.set("generation/system_prompt", "")
        window.settings_panel.seed.setValue(-1)
        window.settings_panel.top_k.setValue(0)
        window.settings_panel.exact.setChecked(False)
    (request,) = requests
    assert request.config.gamma.is_auto
    assert request.config.exact is True
    assert stats["exact"] is True and " · exact" in stats["summary"]
    assert request.config.sampling.seed == 7 and request.config.sampling.top_k == 40
    assert request.messages[0] == {"role": "system", "content": "You are terse."}
    assert request.messages[-1] == {"role": "user", "content": "Name a fruit."}
    assert stats["gamma_label"] == "Auto" and "γ Auto" in stats["summary"]
    assert stats["mode"] == "hybrid"


@contextmanager
def _reloaded_with(
    window: MainWindow, qtbot: QtBot, box: QSpinBox, value: int
) -> Iterator[LoadedState[Any]]:
    """Set a load setting and wait for the models to reload with it; put it back after."""
    before = box.value()
    with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
        box.setValue(value)
    try:
        loaded = window.models.loaded
        assert loaded is not None and loaded.target is not None
        assert window.state == UiState.Idle
        yield loaded
    finally:
        with qtbot.waitSignal(window.catalogChanged, timeout=REPLY_TIMEOUT_MS):
            box.setValue(before)


def test_gpu_layers_reload_the_models(window: MainWindow, qtbot: QtBot) -> None:
    with _reloaded_with(window, qtbot, window.settings_panel.target_layers, 0) as loaded:
        assert loaded.target is not None and loaded.target.n_gpu_layers == 0
        assert loaded.draft.config is not None and loaded.draft.config.n_gpu_layers == -1


def test_the_saved_chats_setting_sizes_the_targets_prompt_cache(
    window: MainWindow, qtbot: QtBot
) -> None:
    assert window.settings_panel.prompt_cache.value() == DEFAULT_PROMPT_CACHE_MIB
    with _reloaded_with(window, qtbot, window.settings_panel.prompt_cache, 0) as loaded:
        assert loaded.target is not None and loaded.target.prompt_cache_mib == 0


def test_the_memory_panel_counts_the_chats_the_target_keeps(
    window: MainWindow, qtbot: QtBot
) -> None:
    window.settings.set("generation/max_tokens", 24)
    send(qtbot, window, LONG_PROMPT)
    before = window.models.memory.target_saved
    window.new_chat()
    # The new conversation takes the cache; the first one's state is saved as it goes.
    send(qtbot, window, "Name three colours.")
    qtbot.waitUntil(lambda: window.models.memory.target_saved > before, timeout=REPLY_TIMEOUT_MS)
    refresh_memory(window)
    assert window.metrics.saved_memory.text() == format_bytes(window.models.memory.target_saved)


def test_a_conversation_too_long_for_the_context_says_so(window: MainWindow, qtbot: QtBot) -> None:
    with _reloaded_with(window, qtbot, window.settings_panel.context, 256):
        window.prompt.setPlainText("Please summarise: " + "the cat sat on the mat. " * 80)
        with qtbot.waitSignal(window.replyFailed, timeout=REPLY_TIMEOUT_MS) as failed:
            window.send()
        message = failed.args[0]
        assert message.startswith("The conversation is ") and "context holds 256" in message
        assert window.banner.text == message
        assert window.state == UiState.Idle
        assert window.send_button.isEnabled() and not window.stop_button.isEnabled()
    window.new_chat()
    assert send(qtbot, window, "Hi!")["generated_tokens"] > 0
