"""The chat window: composes the widgets and turns user actions into worker requests.

It renders from one UiState (habit: no scattered booleans): which buttons are enabled follows
from the state alone. It never calls llama.cpp; every model operation is a request to the
EngineHost, every answer a queued signal handled here on the UI thread.
"""

from __future__ import annotations

import enum
import itertools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

from app.bench import run as bench
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, ModelConfig, SamplingConfig
from app.engine.control import GenerationControl
from app.engine.events import RoundRecord, TokenEvent
from app.engine.result import GenerationResult
from app.engine.runtime import MemoryUsage
from app.llama.resources import GpuProbe, process_ram_bytes
from app.paths import models_dir
from app.store import ConversationStore, StoreError
from models.compat import check_draft_file
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

METRICS_INTERVAL_MS = 200  # five refreshes a second while generating
IDLE_MEMORY_INTERVAL_MS = 2000
SHUTDOWN_TIMEOUT_MS = 20000
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
        self.store = store
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
        self._conversation_id: int | None = None
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
        self.regenerate_button.setEnabled(s == UiState.Idle and self._last_reply_id() is not None)
        self.conversations.setEnabled(not generating)
        self.controls.target_combo.setEnabled(s in (UiState.Idle, UiState.NoModel))
        self.controls.draft_combo.setEnabled(s == UiState.Idle)
        self.controls.add_button.setEnabled(s in (UiState.Idle, UiState.NoModel))
        # The comparison loads its own copies of the models; running it beside a reply would
        # halve both on a CPU and falsify its timings.
        self.compare_button.setEnabled(s == UiState.Idle and self.last_prompt() is not None)
        self.load_row.setVisible(s == UiState.LoadingModel)
        bar = self.statusBar()
        if s == UiState.NoModel:
            bar.showMessage(NO_MODEL_MESSAGE)
        elif bar.currentMessage() == NO_MODEL_MESSAGE:
            bar.clearMessage()

    def show_error(self, text: str) -> None:
        self.banner.show_message(text)
        self.errorShown.emit(text)

    def _stored(self, write: Callable[[], object]) -> bool:
        """Run a store write; on a locked or full database say so and report False."""
        try:
            write()
        except StoreError as exc:
            self.show_error(describe(exc))
            return False
        return True

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

    def model_folders(self) -> list[Path]:
        """The folders the Models dialog searches besides the app's own: the user's folders
        and those of the files added one by one (the dialog thinks in folders)."""
        folders = [Path(f) for f in self.settings.get_list("models/extra_folders")]
        for file in self.settings.get_list("models/extra_files"):
            parent = Path(file).parent
            # The app's models folder is always scanned; listing it again would only duplicate.
            if parent not in folders and not parent.is_relative_to(self.models_folder):
                folders.append(parent)
        return folders

    def open_models_dialog(self) -> ModelsDialog:
        dialog = self._models_dialog
        if dialog is None:
            dialog = ModelsDialog(
                self,
                extra_dirs=self.model_folders(),
                n_ctx=self.settings.get_int("models/n_ctx"),
                n_gpu_layers=self.settings.get_int("models/target_gpu_layers"),
                drafts_dir=self.models_folder,  # made drafts land where the dropdowns look
            )
            dialog.foldersChanged.connect(self._on_model_folders_changed)
            dialog.modelsChanged.connect(self.refresh_catalog)
            self._models_dialog = dialog
        else:
            dialog.set_memory_settings(
                self.settings.get_int("models/n_ctx"),
                self.settings.get_int("models/target_gpu_layers"),
            )
            # Files dropped on the window since the dialog was made: their folders too.
            known = dialog.extra_dirs
            for folder in self.model_folders():
                if folder not in known:
                    dialog.add_folder(folder)
        if dialog.isVisible():
            # Open already, maybe behind the window: bring it to the front.
            dialog.raise_()
            dialog.activateWindow()
        else:
            dialog.show()
        return dialog

    def _on_model_folders_changed(self, folders: list[Path]) -> None:
        kept = [Path(f) for f in folders]
        removed = [f for f in self.model_folders() if f not in kept]
        # A removed folder that only held files added one by one: forget those files too, or
        # the folder would come back with them the next time the dialog opens.
        files = [
            f for f in self.settings.get_list("models/extra_files") if Path(f).parent not in removed
        ]
        self.settings.set("models/extra_files", files)
        self.settings.set("models/extra_folders", [str(f) for f in kept])

    # -- the Compare dialog -------------------------------------------------------------------

    def last_prompt(self) -> str | None:
        """The current conversation's last user message, the prompt a comparison runs on."""
        if self._conversation_id is None:
            return None
        for stored in reversed(self.store.messages(self._conversation_id)):
            if stored.role == "user":
                return stored.content
        return None

    def compare_drafts(self) -> list[bench.DraftChoice]:
        """Every installed draft the catalog finds compatible with the target and smaller."""
        catalog = self.models.catalog
        if catalog is None or catalog.target is None:
            return []
        target_size = catalog.target.size_bytes
        usable = [d for d in catalog.drafts if d.compatible and d.size_bytes < target_size]
        names = [Path(d.path).name for d in usable]
        return [
            # The bench needs distinct labels; same-named files in two folders get the folder.
            bench.DraftChoice(
                name if names.count(name) == 1 else f"{Path(d.path).parent.name}/{name}",
                Path(d.path),
            )
            for d, name in zip(usable, names, strict=True)
        ]

    def compare_bench(self) -> bench.BenchCallable | None:
        """The comparison the Compare dialog runs: this chat's target, settings and γ, with
        every compatible draft. None without a target or a draft."""
        loaded = self.models.loaded
        drafts = self.compare_drafts()
        if loaded is None or loaded.target is None or not drafts:
            return None
        target = loaded.target
        config = self.generation_config()
        gamma: bench.GammaSetting = bench.AUTO if config.adaptive else config.gamma
        draft_template = loaded.draft.config or ModelConfig(
            "",
            n_ctx=target.n_ctx,
            n_gpu_layers=self.settings.get_int("models/draft_gpu_layers"),
            n_threads=target.n_threads,
        )
        # prompt_bench loads its own copies of the models on the dialog's thread: the window's
        # engine thread and its models are never touched.
        return bench.prompt_bench(
            target=target,
            drafts=drafts,
            gammas=[gamma],
            base=config,
            draft_template=draft_template,
            vet_draft=check_draft_file,
        )

    def open_compare_dialog(self) -> CompareDialog | None:
        prompt = self.last_prompt()
        if self._state != UiState.Idle or prompt is None:
            return None
        run = self.compare_bench()
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

    def _refresh_conversations(self) -> None:
        self.conversations.set_conversations(self.store.conversations(), self._conversation_id)

    @property
    def conversation_id(self) -> int | None:
        return self._conversation_id

    def new_chat(self) -> None:
        if self._state in (UiState.Generating, UiState.Stopping):
            return
        self._conversation_id = None
        self.view.set_messages([])
        self._refresh_conversations()  # also clears the selection: no conversation is current
        self.metrics.clear()
        self.insight.clear()
        self.setWindowTitle("SpecChat")
        self.prompt.setFocus()
        self._render_state()

    def open_conversation(self, conversation_id: int) -> None:
        if self._state in (UiState.Generating, UiState.Stopping):
            return
        self._conversation_id = conversation_id
        messages = []
        for stored in self.store.messages(conversation_id):
            if stored.role == "system":
                continue
            line = str(stored.stats.get("summary", "")) if stored.stats else ""
            messages.append(ViewMessage(stored.role, stored.content, stored.segments, line))
        self.view.set_messages(messages)
        summary = self.store.conversation(conversation_id)
        self.setWindowTitle(f"SpecChat — {summary.title}" if summary else "SpecChat")
        self._render_state()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        if not self._stored(lambda: self.store.rename(conversation_id, title)):
            return
        self._refresh_conversations()
        if conversation_id == self._conversation_id:
            self.setWindowTitle(f"SpecChat — {title.strip() or 'Untitled'}")

    def delete_conversation(self, conversation_id: int) -> None:
        if not self._stored(lambda: self.store.delete(conversation_id)):
            return
        if conversation_id == self._conversation_id:
            self.new_chat()
        self._refresh_conversations()

    def _confirm_delete(self, conversation_id: int) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        answer = QMessageBox.question(
            self, "Delete conversation", f"Delete “{summary.title}”? This cannot be undone."
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_conversation(conversation_id)

    def export_conversation(self, conversation_id: int, path: Path) -> None:
        try:
            path.write_text(self.store.export_markdown(conversation_id), encoding="utf-8")
        except (OSError, StoreError) as exc:
            self.show_error(f"Could not export the conversation to {path}: {exc}.")
            return
        self.statusBar().showMessage(f"Exported to {path}", 5000)

    def _export_dialog(self, conversation_id: int) -> None:
        summary = self.store.conversation(conversation_id)
        name = (summary.title if summary else "conversation").replace("/", "-") + ".md"
        path, _filter = QFileDialog.getSaveFileName(
            self, "Export conversation", str(Path.home() / name), "Markdown (*.md)"
        )
        if path:
            self.export_conversation(conversation_id, Path(path))

    # -- sending and generating ---------------------------------------------------------------

    def send(self) -> None:
        text = self.prompt.toPlainText().strip()
        if self._state != UiState.Idle or not text:
            return
        try:
            if self._conversation_id is None:
                title = " ".join(text.split())[:48]
                self._conversation_id = self.store.create_conversation(title)
                self.setWindowTitle(f"SpecChat — {title}")
            # Committed before generating: a crash mid-reply never loses the question.
            self.store.add_message(self._conversation_id, "user", text)
        except (StoreError, OSError) as exc:
            self.show_error(describe(exc))
            return
        self.prompt.clear()
        self.view.set_messages([*self.view.messages, ViewMessage("user", text)])
        self._refresh_conversations()
        self._start_generation()

    def regenerate(self) -> None:
        reply_id = self._last_reply_id()
        if self._state != UiState.Idle or reply_id is None:
            return
        if not self._stored(lambda: self.store.delete_message(reply_id)):
            return
        self.view.drop_last_reply()
        self._start_generation()

    def _last_reply_id(self) -> int | None:
        if self._conversation_id is None:
            return None
        messages = self.store.messages(self._conversation_id)
        if messages and messages[-1].role == "assistant":
            return messages[-1].id
        return None

    def _history(self) -> tuple[ChatMessage, ...]:
        assert self._conversation_id is not None
        history: list[ChatMessage] = []
        system = self.settings.get_str("generation/system_prompt").strip()
        if system:
            history.append({"role": "system", "content": system})
        for stored in self.store.messages(self._conversation_id):
            history.append({"role": stored.role, "content": stored.content})
        return tuple(history)

    def generation_config(self) -> GenerationConfig:
        s = self.settings
        gamma = s.get_int("generation/gamma")
        seed = s.get_int("generation/seed")
        return GenerationConfig(
            max_tokens=s.get_int("generation/max_tokens"),
            gamma=gamma if gamma > 0 else 5,
            adaptive=gamma == 0,
            sampling=SamplingConfig(
                temperature=s.get_float("generation/temperature"),
                top_p=s.get_float("generation/top_p"),
                top_k=s.get_int("generation/top_k"),
                seed=None if seed < 0 else seed,
            ),
            exact=s.get_bool("generation/exact"),
        )

    def _start_generation(self) -> None:
        loaded = self.models.loaded
        assert self._conversation_id is not None and loaded is not None
        speculation = self.controls.speculation.isChecked()
        control = GenerationControl(speculative=speculation)
        config = self.generation_config()
        draft = loaded.draft
        request = GenerateRequest(
            request_id=next(self._request_ids),
            messages=self._history(),
            config=config,
            control=control,
            speculative=True,  # the toggle acts through control.speculative, even mid-reply
        )
        self._control = control
        self._reply = ReplyInProgress(
            request_id=request.request_id,
            conversation_id=self._conversation_id,
            drafter_kind=draft.kind,
            drafter_label=_draft_label(draft),
            gamma_label="Auto" if config.adaptive else str(config.gamma),
            speculation_at_start=speculation,
            exact=config.exact,
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
        try:
            self.store.add_message(
                reply.conversation_id,
                "assistant",
                result.text,
                stats=stats,
                segments=shown.segments if shown else None,
            )
        except (StoreError, OSError) as exc:
            self.show_error(describe(exc))
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
