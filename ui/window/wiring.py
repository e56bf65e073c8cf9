"""What each of the window's signals sets off: the one place the window's parts are joined.

Kept apart from main_window.py, as the menus are (menu_actions.py), so the state machine reads
without its wiring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.llama.resources import process_ram_bytes
from ui.messages import describe
from ui.window.menu_actions import connect_menus
from ui.window.window_state import RELOADING_SETTINGS, UiState

if TYPE_CHECKING:
    from collections.abc import Callable

    from PySide6.QtWidgets import QPlainTextEdit

    from ui.window.main_window import MainWindow

# After the store's own sentence on why a reply could not be saved.
REPLY_KEPT = "The reply stays here and is saved with your next message."


def connect_window(window: MainWindow) -> None:
    flow = window.flow
    flow.started.connect(lambda: window._set_state(UiState.Generating))
    flow.ended.connect(window._on_reply_ended)
    flow.finished.connect(window._on_reply_finished)
    flow.failed.connect(window._on_reply_failed)
    # Left in the chat, a message that overflows the context fails every later one the same
    # way: it goes back to the box to shorten, or to send in a new chat.
    flow.tooLong.connect(lambda: _take_back(window, window.chats.take_back_unfitting))
    flow.unanswered.connect(lambda: _take_back(window, window.chats.take_back_stopped))
    flow.noticed.connect(lambda text: window.statusBar().showMessage(text, 8000))
    flow.headline.connect(window.controls.show_headline)
    flow.saveFailed.connect(lambda exc: window.show_error(f"{describe(exc)} {REPLY_KEPT}"))
    window.metrics_timer.timeout.connect(lambda: refresh_memory(window))

    window.ggufsDropped.connect(window.models.add_files)
    window.prompt.submitted.connect(window.send)
    window.send_button.clicked.connect(window.send)
    window.stop_button.clicked.connect(window.stop)
    window.regenerate_button.clicked.connect(window.regenerate)
    window.cancel_load_button.clicked.connect(window.models.cancel)
    window.conversations.newChatRequested.connect(window.new_chat)
    window.conversations.conversationChosen.connect(window.open_conversation)
    window.conversations.renameRequested.connect(window.rename_conversation)
    window.conversations.deleteRequested.connect(window._confirm_delete)
    window.conversations.exportRequested.connect(window.chats.export_dialog)
    window.models.loadingChanged.connect(window._on_loading_changed)
    window.models.loadProgress.connect(window.show_load_progress)
    window.models.modelsLoaded.connect(window._on_models_loaded)
    window.models.catalogChanged.connect(window._on_catalog)
    window.models.errorRaised.connect(window.show_error)
    window.models.statusMessage.connect(lambda text: window.statusBar().showMessage(text, 5000))
    window.controls.targetChosen.connect(window.choose_target)
    window.controls.draftChosen.connect(window.choose_draft)
    window.controls.speculationToggled.connect(window.set_speculation)
    window.controls.gammaChanged.connect(window._on_gamma_changed)
    window.controls.addModelsRequested.connect(window.add_models_dialog)
    window.models_button.clicked.connect(window.open_models_dialog)
    window.compare_button.clicked.connect(window.open_compare_dialog)
    window.settings.changed.connect(lambda key: _apply_setting(window, key))
    window.settings.saveFailed.connect(window.show_error)
    window.memory_timer.timeout.connect(lambda: refresh_memory(window))
    switch = window.server_switch
    switch.servingChanged.connect(window._on_serving_changed)
    # After the window's own handlers, so the switch reads the setup they leave (γ reaches it
    # through settings.changed).
    window.models.modelsLoaded.connect(lambda _state: switch.follow_window())
    window.controls.speculationToggled.connect(lambda _on: switch.follow_window())
    window.settings.changed.connect(lambda _key: switch.follow_window())
    switch.errorRaised.connect(window.show_error)
    switch.statusMessage.connect(lambda text: window.statusBar().showMessage(text, 8000))
    window.view.examplePicked.connect(window.use_example)
    window.view.editRequested.connect(window.edit_last_message)
    window.view.copied.connect(lambda _text: window.statusBar().showMessage("Copied.", 3000))
    connect_menus(window)


def _apply_setting(window: MainWindow, key: str) -> None:
    """What a changed preference does at once; the rest apply to the next reply."""
    if key == "view/highlight_draft":
        window.view.set_highlight(window.settings.get_bool(key))
        window.highlight_action.setChecked(window.settings.get_bool(key))
    elif key in RELOADING_SETTINGS:
        window.models.reload()


def refresh_memory(window: MainWindow) -> None:
    """The memory readout as of now: the models' own figures, the process, the GPU."""
    loaded = window.models.loaded
    kind = loaded.draft.kind if loaded else "none"
    workers = loaded.workers if loaded else ()
    window.metrics.show_memory(
        window.gpu.read(), process_ram_bytes(), window.models.memory, kind, workers
    )


def _take_back(window: MainWindow, take_back: Callable[[QPlainTextEdit], None]) -> None:
    """A message back to the box after the reply ended: the buttons were drawn before."""
    take_back(window.prompt)
    window._render_state()
