"""The chat window: composes the widgets and turns user actions into worker requests.

It renders from one UiState (no scattered booleans): which buttons are enabled follows
from the state alone. It never calls llama.cpp; every model operation is a request to the
EngineHost, every answer a queued signal handled here on the UI thread.
"""

from __future__ import annotations

import enum
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import RoundRecord, TokenEvent
from app.engine.result import GenerationResult
from app.engine.runtime import MemoryUsage
from app.llama.resources import GpuProbe, process_ram_bytes
from app.paths import models_dir
from app.store import ConversationStore, StoreError
from ui.dialogs.compare_dialog import CompareDialog
from ui.dialogs.models_dialog import ModelsDialog
from ui.formatting import stats_line
from ui.messages import describe
from ui.settings import Settings
from ui.widgets.banner import ErrorBanner
from ui.widgets.conversation_list import ConversationList
from ui.widgets.conversation_view import ConversationView, ViewMessage
from ui.widgets.insight_panel import InsightPanel
from ui.widgets.live_metrics import LiveReply
from ui.widgets.metrics_panel import MetricsPanel
from ui.widgets.model_controls import ModelControls
from ui.widgets.prompt_input import PromptInput
from ui.widgets.settings_panel import SettingsPanel
from ui.window.chat_controller import ChatController
from ui.window.compare import compare_bench
from ui.window.generation_settings import generation_config
from ui.window.model_session import ModelSession
from ui.window.reply import ReplyInProgress
from ui.workers.catalog import Catalog
from ui.workers.engine import (
    DraftChoice,
    EngineHost,
    GenerateRequest,
    GenerationFailure,
    LoadedState,
)
from ui.workers.ops import OpRunner

log = logging.getLogger(__name__)
T = TypeVar("T")

METRICS_INTERVAL_MS = 200  # five refreshes a second while generating
IDLE_MEMORY_INTERVAL_MS = 2000
SHUTDOWN_TIMEOUT_MS = 20000
# What Regenerate samples at when the settings say greedy (0), as chat apps commonly default to.
REGENERATE_TEMPERATURE = 0.7
NO_MODEL_MESSAGE = "No model loaded: choose a target model above."


class UiState(enum.Enum):
    NoModel = "no model"
    LoadingModel = "loading model"
    Idle = "idle"
    Generating = "generating"
    Stopping = "stopping"


class MainWindow(QMainWindow):
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
        ops: OpRunner | None = None,
        gpu: GpuProbe | None = None,
        models_folder: Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("SpecChat")
        self.setAcceptDrops(True)
        self.settings = settings
        self.chat = ChatController(store, settings)
        self.host = host
        self.ops = ops or OpRunner(self)
        self.gpu = gpu or GpuProbe()
        # Fixed at construction: where the app's own models (demo files, downloads) live.
        self.models_folder = models_folder or models_dir()
        self.models = ModelSession(
            settings,
            host,
            self.ops,
            self.models_folder,
            busy=lambda: self._state in (UiState.Generating, UiState.Stopping),
            parent=self,
        )
        self._state = UiState.NoModel
        self._control: GenerationControl | None = None
        self._reply: ReplyInProgress | None = None
        self._live = LiveReply(clock=clock)
        self._last_result: GenerationResult | None = None
        # Made on first use: the Models dialog scans the disk as soon as it exists.
        self._models_dialog: ModelsDialog | None = None
        self._compare_dialog: CompareDialog | None = None
        self._request_ids = itertools.count(1)
        self._closed = False

        self._build()
        self._connect()
        self._render_state()
        self._refresh_conversations()
        self._refresh_memory()

    # -- construction -------------------------------------------------------------------------

    def _build(self) -> None:
        self.conversations = ConversationList()
        self.controls = ModelControls()
        self.banner = ErrorBanner()
        self.view = ConversationView()
        self.view.set_highlight(self.settings.get_bool("view/highlight_draft"))
        self.prompt = PromptInput()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setToolTip("Send (Enter)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("Stop the reply and keep what was written (Esc)")
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setObjectName("regenerateButton")
        self.regenerate_button.setToolTip("Replace the last reply with a new one")
        self.load_bar = QProgressBar()
        self.load_bar.setObjectName("loadProgress")
        self.load_bar.setRange(0, 1000)
        self.load_label = QLabel()
        self.cancel_load_button = QPushButton("Cancel")
        self.cancel_load_button.setObjectName("cancelLoadButton")
        self.load_row = QWidget()
        load_layout = QHBoxLayout(self.load_row)
        load_layout.setContentsMargins(0, 0, 0, 0)
        load_layout.addWidget(self.load_label)
        load_layout.addWidget(self.load_bar, 1)
        load_layout.addWidget(self.cancel_load_button)
        self.load_row.hide()
        self.models_button = QPushButton("Models…")
        self.models_button.setObjectName("modelsButton")
        self.models_button.setToolTip("Every GGUF file on disk, making drafts, downloads")
        self.compare_button = QPushButton("Compare drafts")
        self.compare_button.setObjectName("compareButton")
        self.compare_button.setToolTip(
            "Benchmark the last prompt with plain decoding and every compatible draft"
        )

        self.metrics = MetricsPanel()
        self.metrics.set_speculation(self.settings.get_bool("generation/speculation"))
        self.settings_panel = SettingsPanel(self.settings)
        self.insight = InsightPanel()

        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.regenerate_button)
        buttons.addStretch(1)
        input_row = QHBoxLayout()
        input_row.addWidget(self.prompt, 1)
        input_row.addLayout(buttons)

        center = QWidget()
        center_layout = QVBoxLayout(center)
        top_row = QHBoxLayout()
        top_row.addWidget(self.controls, 1)
        top_row.addWidget(self.models_button)
        top_row.addWidget(self.compare_button)
        center_layout.addLayout(top_row)
        center_layout.addWidget(self.load_row)
        center_layout.addWidget(self.banner)
        center_layout.addWidget(self.view, 1)
        center_layout.addLayout(input_row)

        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.addWidget(self.metrics)
        side_layout.addWidget(self.settings_panel)
        side_layout.addStretch(1)
        side_scroll = QScrollArea()
        side_scroll.setWidget(side)
        side_scroll.setWidgetResizable(True)
        side_scroll.setMinimumWidth(260)
        insight_scroll = QScrollArea()
        insight_scroll.setWidget(self.insight)
        insight_scroll.setWidgetResizable(True)
        self.side_tabs = QTabWidget()
        self.side_tabs.setObjectName("sideTabs")
        self.side_tabs.addTab(side_scroll, "Metrics")
        self.side_tabs.addTab(insight_scroll, "Insight")

        self.splitter = QSplitter()
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.side_tabs)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([200, 700, 300])
        self.setCentralWidget(self.splitter)
        self.resize(1280, 800)
        geometry = self.settings.get_bytes("window/geometry")
        if not geometry.isEmpty():
            self.restoreGeometry(geometry)
        splitter_state = self.settings.get_bytes("window/splitter")
        if not splitter_state.isEmpty():
            self.splitter.restoreState(splitter_state)

        self.controls.speculation.setChecked(self.settings.get_bool("generation/speculation"))
        self.controls.gamma.setValue(self.settings.get_int("generation/gamma"))

        self.metrics_timer = QTimer(self)
        self.metrics_timer.setInterval(METRICS_INTERVAL_MS)
        self.memory_timer = QTimer(self)
        self.memory_timer.setInterval(IDLE_MEMORY_INTERVAL_MS)
        self.memory_timer.start()

        for keys, slot in (
            ("Ctrl+N", self.new_chat),
            ("Esc", self.stop),
            ("Ctrl+L", self.prompt.setFocus),
        ):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(slot)

    def _connect(self) -> None:
        worker = self.host.worker
        queued = Qt.ConnectionType.QueuedConnection
        # Every worker→window connection is queued: the worker's thread must never run UI code.
        worker.tokenReceived.connect(self._on_token, queued)
        worker.roundReceived.connect(self._on_round, queued)
        worker.noticeReceived.connect(self._on_notice, queued)
        worker.generationFinished.connect(self._on_generation_finished, queued)
        worker.generationFailed.connect(self._on_generation_failed, queued)

        self.prompt.submitted.connect(self.send)
        self.send_button.clicked.connect(self.send)
        self.stop_button.clicked.connect(self.stop)
        self.regenerate_button.clicked.connect(self.regenerate)
        self.cancel_load_button.clicked.connect(self.cancel_load)
        self.conversations.newChatRequested.connect(self.new_chat)
        self.conversations.conversationChosen.connect(self.open_conversation)
        self.conversations.renameRequested.connect(self.rename_conversation)
        self.conversations.deleteRequested.connect(self._confirm_delete)
        self.conversations.exportRequested.connect(self._export_dialog)
        self.models.loadingChanged.connect(self._on_loading_changed)
        self.models.loadProgress.connect(self._on_load_progress)
        self.models.modelsLoaded.connect(self._on_models_loaded)
        self.models.catalogChanged.connect(self._on_catalog)
        self.models.errorRaised.connect(self.show_error)
        self.models.statusMessage.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.controls.targetChosen.connect(self.choose_target)
        self.controls.draftChosen.connect(self.choose_draft)
        self.controls.speculationToggled.connect(self.set_speculation)
        self.controls.gammaChanged.connect(self._on_gamma_changed)
        self.controls.addModelsRequested.connect(self._add_models_dialog)
        self.models_button.clicked.connect(self.open_models_dialog)
        self.compare_button.clicked.connect(self.open_compare_dialog)
        self.settings.changed.connect(self._on_setting_changed)
        self.metrics_timer.timeout.connect(self._refresh_live_metrics)
        self.memory_timer.timeout.connect(self._refresh_memory)

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
        s = self._state
        generating = s in (UiState.Generating, UiState.Stopping)
        self.send_button.setEnabled(s == UiState.Idle)
        self.stop_button.setEnabled(s == UiState.Generating)
        self.regenerate_button.setEnabled(
            s == UiState.Idle and self._store_action(self.chat.last_reply_id) is not None
        )
        self.conversations.setEnabled(not generating)
        self.controls.target_combo.setEnabled(s in (UiState.Idle, UiState.NoModel))
        self.controls.draft_combo.setEnabled(s == UiState.Idle)
        self.controls.add_button.setEnabled(s in (UiState.Idle, UiState.NoModel))
        # The comparison loads its own copies of the models; running it beside a reply would
        # halve both on a CPU and falsify its timings.
        self.compare_button.setEnabled(s == UiState.Idle and self.chat.last_prompt() is not None)
        self.load_row.setVisible(s == UiState.LoadingModel)
        bar = self.statusBar()
        if s == UiState.NoModel:
            bar.showMessage(NO_MODEL_MESSAGE)
        elif bar.currentMessage() == NO_MODEL_MESSAGE:
            bar.clearMessage()

    def show_error(self, text: str) -> None:
        self.banner.show_message(text)
        self.errorShown.emit(text)

    # -- models -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the preferred models (the demo pair when nothing is configured)."""
        self.models.start()

    @property
    def loaded(self) -> LoadedState | None:
        return self.models.loaded

    @property
    def catalog(self) -> Catalog | None:
        return self.models.catalog

    def choose_target(self, path: str) -> None:
        if self._state in (UiState.Idle, UiState.NoModel):
            self.models.choose_target(path)

    def choose_draft(self, value: str) -> None:
        if self._state == UiState.Idle:
            self.models.choose_draft(value)

    def refresh_catalog(self) -> None:
        self.models.refresh_catalog()

    def add_model_files(self, paths: list[str]) -> None:
        self.models.add_files(paths)

    def cancel_load(self) -> None:
        self.models.cancel()

    def _on_loading_changed(self, loading: bool) -> None:
        if loading:
            self.load_bar.setValue(0)
            self.load_label.setText("Preparing models…")
            self._set_state(UiState.LoadingModel)
        elif self._state == UiState.LoadingModel:
            loaded = self.models.loaded
            has_target = loaded is not None and loaded.target is not None
            self._set_state(UiState.Idle if has_target else UiState.NoModel)

    def _on_load_progress(self, stage: str, fraction: float) -> None:
        self.load_label.setText(stage)
        self.load_bar.setValue(round(fraction * 1000))

    def _on_models_loaded(self, state: LoadedState) -> None:
        self.controls.set_draft_loaded(state.draft.kind != "none")
        self._refresh_memory()
        self.modelsLoaded.emit(state)

    def _on_catalog(self, catalog: Catalog) -> None:
        self.controls.set_catalog(catalog, self.models.target_path or "", self.models.draft_value)
        self.catalogChanged.emit()

    @property
    def live(self) -> LiveReply:
        """The reply being generated, as far as it has streamed in."""
        return self._live

    @property
    def last_result(self) -> GenerationResult | None:
        """The engine's full result for the last finished reply (rounds included)."""
        return self._last_result

    def _add_models_dialog(self) -> None:
        paths, _filter = QFileDialog.getOpenFileNames(
            self, "Add GGUF model files", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        self.add_model_files(paths)

    # -- the Models dialog --------------------------------------------------------------------

    def open_models_dialog(self) -> ModelsDialog:
        dialog = self._models_dialog
        if dialog is None:
            dialog = ModelsDialog(
                self,
                extra_dirs=self.models.library_folders(),
                n_ctx=self.settings.get_int("models/n_ctx"),
                n_gpu_layers=self.settings.get_int("models/target_gpu_layers"),
                drafts_dir=self.models_folder,  # made drafts land where the dropdowns look
            )
            dialog.foldersChanged.connect(self.models.keep_library_folders)
            dialog.modelsChanged.connect(self.refresh_catalog)
            self._models_dialog = dialog
        else:
            dialog.set_memory_settings(
                self.settings.get_int("models/n_ctx"),
                self.settings.get_int("models/target_gpu_layers"),
            )
            # Files dropped on the window since the dialog was made: their folders too.
            known = dialog.extra_dirs
            for folder in self.models.library_folders():
                if folder not in known:
                    dialog.add_folder(folder)
        if dialog.isVisible():
            # Open already, maybe behind the window: bring it to the front.
            dialog.raise_()
            dialog.activateWindow()
        else:
            dialog.show()
        return dialog

    # -- the Compare dialog -------------------------------------------------------------------

    def open_compare_dialog(self) -> CompareDialog | None:
        prompt = self.chat.last_prompt()
        if self._state != UiState.Idle or prompt is None:
            return None
        run = compare_bench(self.models.loaded, self.models.catalog, self.settings)
        if run is None:
            self.show_error("No compatible draft is installed to compare with the target.")
            return None
        dialog = CompareDialog(run, self, prompt)
        # Window-modal: no reply can start while the comparison measures.
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(self._forget_compare_dialog)
        self._compare_dialog = dialog
        dialog.show()
        return dialog

    def _forget_compare_dialog(self) -> None:
        self._compare_dialog = None

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _dropped_ggufs(event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = _dropped_ggufs(event.mimeData().urls())
        if paths:
            event.acceptProposedAction()
            self.add_model_files(paths)

    # -- conversations ------------------------------------------------------------------------

    def _store_action(self, action: Callable[[], T]) -> T | None:
        """Run a store operation; a storage failure is shown in words, never raised into Qt."""
        try:
            return action()
        except (StoreError, OSError) as exc:
            self.show_error(describe(exc))
            return None

    def _refresh_conversations(self) -> None:
        conversations = self._store_action(self.chat.conversations) or []
        self.conversations.set_conversations(conversations, self.chat.conversation_id)

    def _show_title(self) -> None:
        title = self.chat.title() if self.chat.conversation_id is not None else None
        self.setWindowTitle(f"SpecChat — {title}" if title else "SpecChat")

    @property
    def store(self) -> ConversationStore:
        return self.chat.store

    @property
    def conversation_id(self) -> int | None:
        return self.chat.conversation_id

    def new_chat(self) -> None:
        if self._state in (UiState.Generating, UiState.Stopping):
            return
        self.chat.new_chat()
        self.view.set_messages([])
        self._refresh_conversations()  # also clears the selection: no conversation is current
        self.metrics.clear()
        self.insight.clear()
        self._show_title()
        self.prompt.setFocus()
        self._render_state()

    def open_conversation(self, conversation_id: int) -> None:
        if self._state in (UiState.Generating, UiState.Stopping):
            return
        messages = self._store_action(lambda: self.chat.open(conversation_id))
        if messages is None:
            return
        self.view.set_messages(messages)
        self._show_title()
        self._render_state()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self._store_action(lambda: self.chat.rename(conversation_id, title))
        self._refresh_conversations()
        self._show_title()

    def delete_conversation(self, conversation_id: int) -> None:
        if self._store_action(lambda: self.chat.delete(conversation_id)):
            self.new_chat()
        self._refresh_conversations()

    def _confirm_delete(self, conversation_id: int) -> None:
        title = self._store_action(lambda: self.chat.title(conversation_id))
        if title is None:
            return
        answer = QMessageBox.question(
            self, "Delete conversation", f"Delete “{title}”? This cannot be undone."
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_conversation(conversation_id)

    def export_conversation(self, conversation_id: int, path: Path) -> None:
        try:
            self.chat.export(conversation_id, path)
        except (OSError, StoreError) as exc:
            self.show_error(f"Could not export the conversation to {path}: {exc}.")
            return
        self.statusBar().showMessage(f"Exported to {path}", 5000)

    def _export_dialog(self, conversation_id: int) -> None:
        name = self._store_action(lambda: self.chat.export_name(conversation_id))
        path, _filter = QFileDialog.getSaveFileName(
            self,
            "Export conversation",
            str(Path.home() / (name or "conversation.md")),
            "Markdown (*.md)",
        )
        if path:
            self.export_conversation(conversation_id, Path(path))

    # -- sending and generating ---------------------------------------------------------------

    def send(self) -> None:
        text = self.prompt.toPlainText().strip()
        if self._state != UiState.Idle or not text:
            return
        # On a storage failure the text stays in the box, so nothing typed is lost.
        if self._store_action(lambda: self.chat.add_user_message(text)) is None:
            return
        self._show_title()
        self.prompt.clear()
        self.view.set_messages([*self.view.messages, ViewMessage("user", text)])
        self._refresh_conversations()
        self._start_generation()

    def regenerate(self) -> None:
        if self._state != UiState.Idle or not self._store_action(self.chat.drop_last_reply):
            return
        self.view.drop_last_reply()
        self._start_generation(regenerating=True)

    def generation_config(self) -> GenerationConfig:
        return generation_config(self.settings)

    def _start_generation(self, *, regenerating: bool = False) -> None:
        loaded = self.models.loaded
        conversation_id = self.chat.conversation_id
        assert conversation_id is not None and loaded is not None
        speculation = self.controls.speculation.isChecked()
        control = GenerationControl(speculative=speculation)
        config = self.generation_config()
        variation = None
        if regenerating and config.sampling.temperature == 0:
            # Greedy decoding would write the same words again; a regenerated reply is asked
            # for because the first did not suit, so this one samples, with a fresh seed.
            sampling = replace(config.sampling, temperature=REGENERATE_TEMPERATURE, seed=None)
            config = replace(config, sampling=sampling)
            variation = f"regenerated at temperature {REGENERATE_TEMPERATURE}"
        draft = loaded.draft
        request = GenerateRequest(
            request_id=next(self._request_ids),
            messages=self.chat.history(),
            config=config,
            control=control,
            speculative=True,  # the toggle acts through control.speculative, even mid-reply
        )
        self._control = control
        self._reply = ReplyInProgress(
            request_id=request.request_id,
            conversation_id=conversation_id,
            drafter_kind=draft.kind,
            drafter_label=_draft_label(draft),
            gamma_label="Auto" if config.adaptive else str(config.gamma),
            speculation_at_start=speculation,
            exact=config.exact,
            variation=variation,
        )
        self._live.start(config.gamma if speculation and draft.kind != "none" else 0)
        self.metrics.clear()
        self.insight.clear()
        self.metrics.set_speculation(speculation and draft.kind != "none")
        self.view.begin_reply()
        self._set_state(UiState.Generating)
        self.metrics_timer.start()
        self.host.request_generate(request)

    def stop(self) -> None:
        if self._state == UiState.Generating and self._control is not None:
            self._control.stop()
            self._set_state(UiState.Stopping)
        elif self._state == UiState.LoadingModel:
            self.models.cancel()

    def set_speculation(self, on: bool) -> None:
        self.settings.set("generation/speculation", on)
        if self.controls.speculation.isChecked() != on:
            self.controls.speculation.setChecked(on)
        if self._control is not None:
            self._control.speculative = on  # read by the engine before its next round
        if self._reply is not None:
            self._reply.on_toggle(on)
        loaded = self.models.loaded
        drafter = loaded is not None and loaded.draft.kind != "none"
        self.metrics.set_speculation(on and drafter)

    def _on_gamma_changed(self, value: int) -> None:
        self.settings.set("generation/gamma", value)
        if self._control is not None:
            # A number applies from the next round; Auto needs a fresh reply to start learning.
            self._control.gamma = value if value > 0 else None

    def _on_token(self, event: TokenEvent) -> None:
        if self._reply is None:
            return
        self._live.on_token()
        self.view.append_token(event.text, event.from_draft)

    def _on_round(self, record: RoundRecord) -> None:
        if self._reply is not None:
            self._live.on_round(record)

    def _on_notice(self, message: str) -> None:
        self.statusBar().showMessage(message, 8000)

    def _refresh_live_metrics(self) -> None:
        if self._reply is None:
            return
        self._live.sample()
        speculative = self.controls.speculation.isChecked() and self._reply.drafter_kind != "none"
        self.metrics.show_stats(self._live.stats(), speculative=speculative)
        self.metrics.show_samples(self._live.samples)
        self.insight.update_live(self._live.rounds)
        self._refresh_memory()

    def _on_generation_finished(self, result: GenerationResult) -> None:
        reply = self._reply
        if reply is None:
            return
        self._end_reply()
        self._last_result = result
        stats = reply.stats(result)
        shown = self.view.finish_reply(result.text, stats_line(stats))
        segments = shown.segments if shown else None
        self._store_action(
            lambda: self.chat.save_reply(reply.conversation_id, result.text, stats, segments)
        )
        self._live.sample()
        self.metrics.show_stats(result.stats, speculative=stats["mode"] != "plain")
        self.metrics.show_samples(self._live.samples)
        self.insight.update_from_result(result, _plain_step_s(result))
        self._refresh_conversations()
        self._render_state()
        self.replyFinished.emit(stats)

    def _on_generation_failed(self, failure: GenerationFailure) -> None:
        if self._reply is None:
            return
        self._end_reply()
        self.view.finish_reply("", "", note=failure.message)
        self.show_error(failure.message)
        self.replyFailed.emit(failure.message)

    def _end_reply(self) -> None:
        self._reply = None
        self._control = None
        self.metrics_timer.stop()
        self._set_state(UiState.Idle)
        self.models.run_pending()

    # -- settings and memory ------------------------------------------------------------------

    def _on_setting_changed(self, key: str) -> None:
        if key == "view/highlight_draft":
            self.view.set_highlight(self.settings.get_bool(key))
        elif key in (
            "models/target_gpu_layers",
            "models/draft_gpu_layers",
            "models/n_threads",
            "models/n_ctx",
        ):
            self.models.reload()

    def _refresh_memory(self) -> None:
        loaded = self.models.loaded
        usage = loaded.memory if loaded else MemoryUsage(0, 0, 0, 0, 0, 0)
        kind = loaded.draft.kind if loaded else "none"
        self.metrics.show_memory(self.gpu.read(), process_ram_bytes(), usage, kind)

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
        if self._control is not None:
            self._control.stop()
        self.cancel_load()
        self.metrics_timer.stop()
        self.memory_timer.stop()
        if self._compare_dialog is not None:
            self._compare_dialog.close()  # stops its run and waits for its thread
        if self._models_dialog is not None:
            self._models_dialog.shutdown(SHUTDOWN_TIMEOUT_MS)
        self.settings.set("window/geometry", self.saveGeometry())
        self.settings.set("window/splitter", self.splitter.saveState())
        self.settings.sync()
        self.host.stop(SHUTDOWN_TIMEOUT_MS)
        # The worker's last signals (the stopped reply's FinishEvent) are queued for us now;
        # deliver them so the partial reply is saved before the store closes.
        QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)
        self.ops.shutdown()
        self.gpu.close()
        self.store.close()

    def is_shut_down(self) -> bool:
        return self._closed


def _dropped_ggufs(urls: list[Any]) -> list[str]:
    return [
        u.toLocalFile()
        for u in urls
        if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf")
    ]


def _draft_label(draft: DraftChoice) -> str | None:
    if draft.kind == "ngram":
        return "prompt lookup"
    if draft.kind == "model" and draft.path:
        return Path(draft.path).name
    return None


def _plain_step_s(result: GenerationResult) -> float | None:
    """Seconds of one plain target step, as far as the finished reply tells.

    The engine's own figure lives on the worker thread; its result carries it folded into
    c_verify (mean speculative verify time / plain step), so that is undone first. Without
    speculative rounds, the reply's plain rounds give it; otherwise None (the panel copes).
    """
    spec = [r.verify_s for r in result.rounds if r.drafted > 0]
    c_verify = result.stats.c_verify
    if spec and c_verify:
        return sum(spec) / len(spec) / c_verify
    plain = [r.verify_s for r in result.rounds if r.drafted == 0]
    return sum(plain) / len(plain) if plain else None
