"""The chat window: composes the widgets and turns user actions into worker requests.

It renders from one UiState (no scattered booleans): which buttons are enabled follows
from the state alone. It never calls llama.cpp; every model operation is a request to the
EngineHost, every answer a queued signal handled here on the UI thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent

from app.engine.config import GenerationConfig
from app.engine.model_host import LoadedState
from app.llama.resources import GpuProbe
from app.paths import models_dir
from app.store import ConversationStore
from app.store_text import visible
from models.demo import DemoModels
from ui.dialogs.compare_dialog import CompareDialog
from ui.dialogs.models_dialog import ModelsDialog
from ui.settings import Settings
from ui.widgets.conversation_view import ViewMessage
from ui.window.chat_controller import ChatController
from ui.window.closing import release_window
from ui.window.conversation_actions import ConversationActions
from ui.window.dialog_launcher import DialogLauncher
from ui.window.generation_settings import generation_config
from ui.window.layout import WindowLayout
from ui.window.model_session import ModelSession
from ui.window.reply_flow import ReplyFlow
from ui.window.server_switch import ServerSwitch
from ui.window.window_state import (
    REGENERATE_AFTER_SERVING_MESSAGE,
    SEND_WHEN_READY,
    UiState,
    render_state,
)
from ui.window.wiring import connect_window, refresh_memory
from ui.workers.catalog import Catalog
from ui.workers.engine import forget_history
from ui.workers.engine_host import EngineHost
from ui.workers.jobs import Jobs

SHUTDOWN_TIMEOUT_MS = 20000


class MainWindow(WindowLayout):
    """Signals (for tests and tools):
    stateChanged(UiState), modelsLoaded(LoadedState), catalogChanged(),
    replyFinished(dict): the stats stored with the reply, replyFailed(str), errorShown(str).
    """

    stateChanged = Signal(object)
    modelsLoaded = Signal(object)
    catalogChanged = Signal()
    replyFinished = Signal(dict)
    replyFailed = Signal(str)
    errorShown = Signal(str)

    def __init__(
        self,
        settings: Settings,
        store: ConversationStore,
        host: EngineHost,
        *,
        ops: Jobs | None = None,
        gpu: GpuProbe | None = None,
        models_folder: Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(settings)
        self.host = host
        # A chat or an edited-away exchange deleted: the past-chats index is rebuilt without it.
        self.chat = ChatController(
            store, settings, on_text_deleted=lambda: self.host.request_task(forget_history)
        )
        self.ops = ops or Jobs(self)
        self.gpu = gpu or GpuProbe()
        # Fixed at construction: where the app's own models (demo files, downloads) live.
        self.models_folder = models_folder or models_dir()
        self.models = ModelSession(
            settings,
            host,
            self.ops,
            self.models_folder,
            busy=lambda: self._state in (UiState.Generating, UiState.Stopping, UiState.Serving),
            parent=self,
        )
        self._state = UiState.NoModel
        self.flow = ReplyFlow(
            host=host,
            chat=self.chat,
            view=self.view,
            metrics=self.metrics,
            insight=self.insight,
            timer=self.metrics_timer,
            clock=clock,
            parent=self,
        )
        self.server_switch = ServerSwitch(
            host=host,
            panel=self.server_panel,
            metrics=self.metrics,
            insight=self.insight,
            models=self.models,
            reply_settings=lambda: (
                self.generation_config(),
                self.controls.speculation.isChecked(),
            ),
            clock=clock,
            parent=self,
        )
        self.chats = ConversationActions(
            self,
            chat=self.chat,
            view=self.view,
            conversations=self.conversations,
            show_error=self.show_error,
        )
        self.dialogs = DialogLauncher(
            self,
            settings=settings,
            models=self.models,
            chat=self.chat,
            host=host,
            models_folder=self.models_folder,
            show_error=self.show_error,
        )
        self._closed = False
        # Enter pressed while a request ran, models loaded or a reply stopped: sent after.
        self._send_when_ready = False

        connect_window(self)
        self._render_state()
        self.chats.refresh_list()
        refresh_memory(self)

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> UiState:
        return self._state

    def _set_state(self, state: UiState) -> None:
        if state != self._state:
            self._state = state
            self._render_state()
            self.stateChanged.emit(state)

    def _render_state(self) -> None:
        render_state(self, self._state)

    def show_error(self, text: str) -> None:
        self.banner.show_message(text)
        self.errorShown.emit(text)

    # -- models -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the preferred models (the demo pair when nothing is configured)."""
        self.models.start()

    def choose_target(self, path: str) -> None:
        if self._state in (UiState.Idle, UiState.NoModel):
            self.models.choose_target(path)

    def choose_draft(self, value: str) -> None:
        if self._state == UiState.Idle:
            self.models.choose_draft(value)

    def _on_loading_changed(self, loading: bool) -> None:
        if loading:
            self.show_load_progress("Preparing models…", 0.0)
            self._set_state(UiState.LoadingModel)
        elif self._state == UiState.LoadingModel:
            loaded = self.models.loaded
            has_target = loaded is not None and loaded.target is not None
            self._set_state(UiState.Idle if has_target else UiState.NoModel)
            self._send_if_waiting()

    def _on_models_loaded(self, state: LoadedState[DemoModels]) -> None:
        self.controls.set_draft_loaded(state.draft.kind != "none")
        self.flow.models_changed(state.target)
        # The engine has loaded llama.cpp's library by now: asking it for RPC costs nothing.
        self.settings_panel.remote_workers.check_build()
        if state.target is None and self._state == UiState.Idle:
            self._set_state(UiState.NoModel)  # lost with a worker: nothing left to reply with
        refresh_memory(self)
        self.dialogs.models_changed()
        note = self.models.new_context_note(state)
        if note:
            self.statusBar().showMessage(note[:1].upper() + note[1:] + ".", 15000)
        self.modelsLoaded.emit(state)

    def _on_catalog(self, catalog: Catalog) -> None:
        self.controls.set_catalog(catalog, self.models.target_path or "", self.models.draft_value)
        self.catalogChanged.emit()

    def add_models_dialog(self) -> None:
        self.models.add_files(self.dialogs.pick_model_files())

    # -- dialogs ------------------------------------------------------------------------------

    def open_models_dialog(self) -> ModelsDialog:
        return self.dialogs.open_models()

    def open_compare_dialog(self) -> CompareDialog | None:
        if self._state != UiState.Idle:
            return None
        return self.dialogs.open_compare()

    # -- conversations ------------------------------------------------------------------------

    @property
    def store(self) -> ConversationStore:
        return self.chat.store

    @property
    def conversation_id(self) -> int | None:
        return self.chat.conversation_id

    def new_chat(self) -> None:
        if self._state in (UiState.Generating, UiState.Stopping):
            return
        self.chats.new_chat()
        self.metrics.clear()
        self.insight.clear()
        self.prompt.setFocus()
        self._render_state()

    def open_conversation(self, conversation_id: int) -> None:
        if self._state not in (UiState.Generating, UiState.Stopping):
            self.chats.forget_take_back()
            if self.chats.open(conversation_id):
                # The figures were another chat's reply's.
                self.metrics.clear()
                self.insight.clear()
            self._render_state()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.chats.rename(conversation_id, title)

    def delete_conversation(self, conversation_id: int) -> None:
        if self.chats.delete(conversation_id):
            self.new_chat()

    def _confirm_delete(self, conversation_id: int) -> None:
        if self.chats.confirm_delete(conversation_id):
            self.delete_conversation(conversation_id)

    def export_conversation(self, conversation_id: int, path: Path) -> None:
        self.chats.export(conversation_id, path)

    # -- sending and generating ---------------------------------------------------------------

    def send(self) -> None:
        text = self.prompt.toPlainText().strip()
        if not visible(text):  # only zero-width or control characters: nothing to send
            text = ""
        state = self._state
        if state == UiState.Idle and self.server_switch.request_ahead():
            # It would wait behind a server request on the engine, shown as Generating.
            state = UiState.Serving
        if state in SEND_WHEN_READY and text:
            # Sent as soon as the request ends or the models are in, not on a second Enter.
            self._send_when_ready = True
            self.statusBar().showMessage(SEND_WHEN_READY[state])
            return
        if state != UiState.Idle or not text:
            return
        if self.chats.left_chat_deleted_elsewhere():
            self.new_chat()
        # On a storage failure the text stays in the box, so nothing typed is lost.
        if self.chats.store_action(lambda: self.chat.add_user_message(text)) is None:
            return
        self.chats.forget_take_back()
        self.chats.show_title()
        self.prompt.clear()
        self.view.append_message(ViewMessage("user", text))
        self.chats.refresh_list()
        self._start_generation()

    def regenerate(self) -> None:
        if self._state != UiState.Idle:
            return
        if self.server_switch.request_ahead():  # it would wait behind it, shown as Generating
            self.statusBar().showMessage(REGENERATE_AFTER_SERVING_MESSAGE)
            return
        # The reply to write again is the one on screen, even one the store refused before.
        if self.chats.store_action(self.chat.save_unsaved_reply) is None:
            return
        reply_id = self.chats.store_action(self.chat.last_reply_id)
        if reply_id is not None:
            self._start_generation(replacing=reply_id)

    def copy_last_reply(self) -> None:
        self.chats.copy_last_reply()

    def edit_last_message(self) -> None:
        """Take the last message back into the box (with its reply gone) to change and resend."""
        if self._state == UiState.Idle and self.chats.take_back_last_message(self.prompt):
            self._render_state()

    def export_current(self) -> None:
        if self.chat.conversation_id is not None:
            self.chats.export_dialog(self.chat.conversation_id)

    def generation_config(self) -> GenerationConfig:
        return generation_config(self.settings)

    def _start_generation(self, *, replacing: int | None = None) -> None:
        loaded = self.models.loaded
        assert loaded is not None
        # An error shown before spoke of an earlier action (a context since raised, a failed
        # export); left up, it read as this reply's. This reply's own show again.
        self.banner.hide()
        self.flow.start(
            loaded.draft,
            self.generation_config(),
            speculation=self.controls.speculation.isChecked(),
            replacing=replacing,
        )

    def stop(self) -> None:
        if self._state == UiState.Generating and self.flow.stop():
            self._set_state(UiState.Stopping)
        elif self._state == UiState.LoadingModel:
            self.models.cancel()

    def set_speculation(self, on: bool) -> None:
        self.settings.set("generation/speculation", on)
        if self.controls.speculation.isChecked() != on:
            self.controls.speculation.setChecked(on)
        loaded = self.models.loaded
        self.flow.set_speculation(
            on, draft_loaded=loaded is not None and loaded.draft.kind != "none"
        )

    def _on_gamma_changed(self, value: int) -> None:
        self.settings.set("generation/gamma", value)
        self.flow.set_gamma(value)

    def _on_reply_ended(self) -> None:
        self._set_state(UiState.Idle)
        self.models.run_pending()

    def _on_reply_finished(self, stats: dict[str, Any]) -> None:
        self.chats.refresh_list()
        self._render_state()
        self.replyFinished.emit(stats)
        # Here, not when the reply ended: a message sent while it stopped follows it once saved.
        self._send_if_waiting()

    def _on_reply_failed(self, message: str) -> None:
        self.show_error(message)
        self.replyFailed.emit(message)
        self._send_if_waiting()

    # -- the local server ---------------------------------------------------------------------

    def _on_serving_changed(self, serving: bool) -> None:
        if serving and self._state == UiState.Idle:
            self._set_state(UiState.Serving)
            if self._send_when_ready:  # held before the request started (send)
                self.statusBar().showMessage(SEND_WHEN_READY[UiState.Serving])
        elif not serving and self._state == UiState.Serving:
            self._set_state(UiState.Idle)
            self.models.run_pending()
            self._send_if_waiting()
        elif not serving and self._state == UiState.Idle:
            self._send_if_waiting()  # held behind a request that the stopped server dropped

    def _send_if_waiting(self) -> None:
        if self._send_when_ready and not self._closed:
            # The text stays in the box if it cannot go (no model, or a reload held them).
            self._send_when_ready = False
            self.send()

    # -- closing ------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closed:
            self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Stop any reply or load, free the models on their thread, and close the store."""
        if self._closed:
            return
        self._closed = True
        release_window(self, SHUTDOWN_TIMEOUT_MS)

    def is_shut_down(self) -> bool:
        return self._closed
