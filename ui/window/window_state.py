"""The window's one state (UiState) and what each state enables and says.

The window renders from this state alone (no scattered booleans): which buttons are enabled
and what the status bar says follow from it and from the chat's last reply.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ui.window.main_window import MainWindow

NO_MODEL_MESSAGE = "No model loaded: choose a target model above."
SERVING_MESSAGE = "Answering a request from the local server; press Enter to send when it ends."
SEND_AFTER_SERVING_MESSAGE = "Your message goes as soon as the local server request ends."
SEND_AFTER_LOADING_MESSAGE = "Your message goes as soon as the models are loaded."
SEND_AFTER_STOPPING_MESSAGE = "Your message goes as soon as the reply has stopped."
REGENERATE_AFTER_SERVING_MESSAGE = (
    "A local server request is waiting; press Regenerate again when it has been answered."
)
# Settings whose change reloads the models (the rest apply to the next reply).
RELOADING_SETTINGS = (
    "models/target_gpu_layers",
    "models/draft_gpu_layers",
    "models/n_threads",
    "models/n_ctx",
    "models/prompt_cache_mib",
    "models/target_rpc",
    "models/draft_rpc",
    "models/draft_with_history",  # reloads the draft only: the target is unchanged
)


class UiState(enum.Enum):
    NoModel = "no model"
    LoadingModel = "loading model"
    Idle = "idle"
    Generating = "generating"
    Stopping = "stopping"
    Serving = "answering a local server request"


# What Enter says in a state that cannot send yet; the message goes once the state ends.
SEND_WHEN_READY = {
    UiState.Serving: SEND_AFTER_SERVING_MESSAGE,
    UiState.LoadingModel: SEND_AFTER_LOADING_MESSAGE,
    UiState.Stopping: SEND_AFTER_STOPPING_MESSAGE,
}


def render_state(w: MainWindow, s: UiState) -> None:
    """Enable the window's controls and set its status line for state s."""
    generating = s in (UiState.Generating, UiState.Stopping)
    w.send_button.setEnabled(s in (UiState.Idle, UiState.Serving))
    w.stop_button.setEnabled(s == UiState.Generating)
    w.regenerate_button.setEnabled(
        s == UiState.Idle and w.chats.store_action(w.chat.last_reply_id) is not None
    )
    w.conversations.setEnabled(not generating)
    w.controls.target_combo.setEnabled(s in (UiState.Idle, UiState.NoModel))
    w.controls.draft_combo.setEnabled(s == UiState.Idle)
    w.controls.add_button.setEnabled(s in (UiState.Idle, UiState.NoModel))
    # The comparison runs on the chat's engine thread and models: only from Idle, so no
    # reply runs beside it to falsify its timings.
    w.compare_button.setEnabled(s == UiState.Idle and w.chat.last_prompt() is not None)
    # The menu's twins of those buttons (and their shortcuts) follow them: enabled, they did
    # nothing while a reply ran.
    for action, button in (
        (w.stop_action, w.stop_button),
        (w.regenerate_action, w.regenerate_button),
        (w.compare_action, w.compare_button),
    ):
        action.setEnabled(button.isEnabled())
    w.new_chat_action.setEnabled(not generating)
    w.edit_last_action.setEnabled(s == UiState.Idle)
    w.load_row.setVisible(s == UiState.LoadingModel)
    bar = w.statusBar()
    if s == UiState.NoModel:
        bar.showMessage(NO_MODEL_MESSAGE)
    elif s == UiState.Serving:
        bar.showMessage(SERVING_MESSAGE)
    elif bar.currentMessage() in (
        NO_MODEL_MESSAGE,
        SERVING_MESSAGE,
        REGENERATE_AFTER_SERVING_MESSAGE,
        *SEND_WHEN_READY.values(),
    ):
        bar.clearMessage()
