"""What the main window looks like: its widgets, panels, menus and shortcuts.

MainWindow (main_window.py) inherits this and adds the behaviour; keeping the two apart means
the long but linear construction is read in one place and the state machine in another.
The layout fits a 1280×720 screen: the model bar takes two rows, the side panel never scrolls
sideways, and the chat list keeps a readable width.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ui.named_widgets import push_button
from ui.screen_fit import fit_to_screen
from ui.settings import Settings
from ui.themes import THEMES
from ui.widgets.banner import ErrorBanner
from ui.widgets.conversation_list import ConversationList
from ui.widgets.conversation_view import ConversationView
from ui.widgets.inputs import WheelGuard
from ui.widgets.insight_panel import InsightPanel
from ui.widgets.metrics_panel import MetricsPanel
from ui.widgets.model_controls import ModelControls
from ui.widgets.prompt_input import PromptInput
from ui.widgets.rendering import shading_legend
from ui.widgets.server_panel import ServerPanel
from ui.widgets.settings_panel import SettingsPanel
from ui.window.dialog_launcher import dropped_ggufs

METRICS_INTERVAL_MS = 200  # five refreshes a second while generating
IDLE_MEMORY_INTERVAL_MS = 2000
SIDE_PANEL_WIDTH = 320
CHAT_LIST_WIDTH = 190


def _side_scroll(widget: QWidget, name: str) -> QScrollArea:
    scroll = QScrollArea()
    # It takes Tab focus (arrow keys scroll it), so a screen reader needs to say which it is.
    scroll.setAccessibleName(name)
    scroll.setWidget(widget)
    scroll.setWidgetResizable(True)
    # The panel's content follows the panel's width; a sideways scroll bar would hide figures.
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    # So it also never gets narrower than its content: the splitter and the window's minimum
    # width then leave room for every box, where they used to cut the panel's right edge.
    scroll.setMinimumWidth(
        widget.minimumSizeHint().width()
        + scroll.verticalScrollBar().sizeHint().width()
        + 2 * scroll.frameWidth()
    )
    return scroll


class WindowLayout(QMainWindow):
    """Signals: ggufsDropped(list[str]): GGUF files dropped on the window, to add."""

    ggufsDropped = Signal(list)

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings
        self.setObjectName("mainWindow")
        self.setWindowTitle("SpecChat")
        self.setAcceptDrops(True)
        self._shown = False
        self._build_widgets()
        self._build_layout()
        self._build_menus()
        self.wheel_guard = WheelGuard(self)
        self.wheel_guard.guard(self)
        self._restore_geometry()

    def _build_widgets(self) -> None:
        self.conversations = ConversationList()
        self.controls = ModelControls()
        self.banner = ErrorBanner()
        self.view = ConversationView()
        self.view.set_highlight(self.settings.get_bool("view/highlight_draft"))
        self.prompt = PromptInput()
        self.send_button = push_button("Send", "sendButton", "Send (Enter)")
        self.stop_button = push_button(
            "Stop", "stopButton", "Stop the reply and keep what was written (Esc)"
        )
        self.regenerate_button = push_button(
            "Regenerate",
            "regenerateButton",
            "Replace the last reply with a new one (Ctrl+R). At temperature 0 the new reply is "
            "sampled, or it would repeat the same words.",
        )
        self.load_bar = QProgressBar()
        self.load_bar.setObjectName("loadProgress")
        self.load_bar.setRange(0, 1000)
        self.load_label = QLabel()
        # Stage texts name files ("writing SmolLM2-135M-Instruct.F32.gguf: …"): cut, not widen.
        self.load_label.setMinimumWidth(40)
        self.cancel_load_button = push_button("Cancel", "cancelLoadButton")
        self.models_button = push_button(
            "Models…", "modelsButton", "Every GGUF file on disk, making drafts, downloads (Ctrl+M)"
        )
        self.compare_button = push_button(
            "Compare drafts",
            "compareButton",
            "Benchmark the last prompt with plain decoding and every compatible draft",
        )
        self.metrics = MetricsPanel()
        self.metrics.set_speculation(self.settings.get_bool("generation/speculation"))
        self.settings_panel = SettingsPanel(self.settings)
        self.server_panel = ServerPanel(self.settings)
        self.insight = InsightPanel()
        self.controls.speculation.setChecked(self.settings.get_bool("generation/speculation"))
        self.controls.gamma.setValue(self.settings.get_int("generation/gamma"))
        self.metrics_timer = QTimer(self)
        self.metrics_timer.setInterval(METRICS_INTERVAL_MS)
        self.memory_timer = QTimer(self)
        self.memory_timer.setInterval(IDLE_MEMORY_INTERVAL_MS)
        self.memory_timer.start()

    def _build_layout(self) -> None:
        self.load_row = QWidget()
        load_layout = QHBoxLayout(self.load_row)
        load_layout.setContentsMargins(0, 0, 0, 0)
        load_layout.addWidget(self.load_label)
        load_layout.addWidget(self.load_bar, 1)
        load_layout.addWidget(self.cancel_load_button)
        self.load_row.hide()
        self.controls.option_row.addWidget(self.models_button)
        self.controls.option_row.addWidget(self.compare_button)

        buttons = QVBoxLayout()
        for button in (self.send_button, self.stop_button, self.regenerate_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        input_row = QHBoxLayout()
        input_row.addWidget(self.prompt, 1)
        input_row.addLayout(buttons)

        center = QWidget()
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(6, 6, 6, 6)
        center_layout.addWidget(self.controls)
        center_layout.addWidget(self.load_row)
        center_layout.addWidget(self.banner)
        center_layout.addWidget(self.view, 1)
        center_layout.addLayout(input_row)

        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.addWidget(self.metrics)
        side_layout.addWidget(self.settings_panel)
        side_layout.addWidget(self.server_panel)
        side_layout.addStretch(1)
        self.side_tabs = QTabWidget()
        self.side_tabs.setObjectName("sideTabs")
        self.side_tabs.addTab(_side_scroll(side, "Metrics panel"), "Metrics")
        self.side_tabs.addTab(_side_scroll(self.insight, "Insight panel"), "Insight")

        self.conversations.setMinimumWidth(140)
        self.splitter = QSplitter()
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.side_tabs)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.setCentralWidget(self.splitter)
        self.splitter.setSizes([CHAT_LIST_WIDTH, 1280 - CHAT_LIST_WIDTH - SIDE_PANEL_WIDTH, 320])

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.new_chat_action = self._action(file_menu, "&New chat", "Ctrl+N")
        self.add_models_action = self._action(file_menu, "&Add GGUF files…", "Ctrl+O")
        self.export_action = self._action(file_menu, "&Export chat as Markdown…", "Ctrl+Shift+E")
        file_menu.addSeparator()
        self.quit_action = self._action(file_menu, "&Quit", "Ctrl+Q")

        chat_menu = bar.addMenu("&Chat")
        self.stop_action = self._action(chat_menu, "&Stop the reply", "Esc")
        self.regenerate_action = self._action(chat_menu, "&Regenerate the last reply", "Ctrl+R")
        self.copy_reply_action = self._action(chat_menu, "&Copy the last reply", "Ctrl+Shift+C")
        self.edit_last_action = self._action(
            chat_menu, "&Edit and resend the last message", "Ctrl+E"
        )
        self.focus_prompt_action = self._action(chat_menu, "&Write a message", "Ctrl+L")

        view_menu = bar.addMenu("&View")
        self.highlight_action = self._action(view_menu, "&Shade text the draft wrote", None)
        self.highlight_action.setCheckable(True)
        self.highlight_action.setToolTip(shading_legend())
        view_menu.setToolTipsVisible(True)
        self.highlight_action.setChecked(self.settings.get_bool("view/highlight_draft"))
        theme_menu = QMenu("&Theme", self)
        view_menu.addMenu(theme_menu)
        self.theme_actions = QActionGroup(self)
        current = self.settings.get_str("view/theme")
        for key, theme in THEMES.items():
            action = QAction(theme.label, self)
            action.setCheckable(True)
            action.setChecked(key == current)
            action.setData(key)
            self.theme_actions.addAction(action)
            theme_menu.addAction(action)
        self.metrics_tab_action = self._action(view_menu, "&Metrics", "Ctrl+1")
        self.insight_tab_action = self._action(view_menu, "&Insight", "Ctrl+2")

        models_menu = bar.addMenu("&Models")
        self.models_action = self._action(models_menu, "&Model library…", "Ctrl+M")
        self.compare_action = self._action(models_menu, "&Compare drafts…", "Ctrl+Shift+M")
        self.speculation_action = self._action(models_menu, "&Speculation on/off", "Ctrl+Shift+S")

        help_menu = bar.addMenu("&Help")
        self.shortcuts_action = self._action(help_menu, "&Keyboard shortcuts", "F1")
        self.about_action = self._action(help_menu, "&About SpecChat", None)

    def show_load_progress(self, stage: str, fraction: float) -> None:
        self.load_label.setText(stage)
        self.load_bar.setValue(round(fraction * 1000))

    def use_example(self, text: str) -> None:
        """An example prompt from the welcome page, in the box to send or change."""
        self.prompt.setPlainText(text)
        self.prompt.setFocus()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_ggufs(event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_ggufs(event.mimeData().urls())
        if paths:
            event.acceptProposedAction()
            self.ggufsDropped.emit(paths)

    def _action(self, menu: QMenu, text: str, keys: str | None) -> QAction:
        action = QAction(text, self)
        if keys:
            action.setShortcut(QKeySequence(keys))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        menu.addAction(action)
        # Menu shortcuts only fire while the action is in a widget of the window.
        self.addAction(action)
        return action

    def shortcut_table(self) -> list[tuple[str, str]]:
        """(keys, what they do) for every menu action with a shortcut, for the help dialog."""
        rows = []
        for menu_action in self.menuBar().actions():
            menu = menu_action.menu()
            if not isinstance(menu, QMenu):
                continue
            for action in menu.actions():
                keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
                if keys:
                    rows.append((keys, action.text().replace("&", "").rstrip("…")))
        return rows

    def _restore_geometry(self) -> None:
        self.resize(1280, 720)
        geometry = self.settings.get_bytes("window/geometry")
        if not geometry.isEmpty():
            self.restoreGeometry(geometry)
        splitter_state = self.settings.get_bytes("window/splitter")
        if not splitter_state.isEmpty():
            self.splitter.restoreState(splitter_state)
        self.fit_screen()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            self.fit_screen()

    def fit_screen(self) -> None:
        """Shrink the window to the screen's free area (a geometry saved on a larger screen,
        or the default on a small one): Send and the side panel must never be off-screen."""
        fit_to_screen(self)
