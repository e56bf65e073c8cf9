"""Generation settings under the metrics: GPU layers, sampling, reply length, system prompt.

Each control reads its preference once and writes it back on change; the window reacts to
Settings.changed (GPU layers and remote workers reload the models; the rest apply to the next
reply).
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ui.settings import FLOAT_RANGES, INT_RANGES, Settings
from ui.widgets.remote_workers import RemoteWorkersBox
from ui.widgets.rendering import shading_legend


def _int_box(name: str, low: int, high: int, tip: str, special: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setObjectName(name)
    box.setRange(low, high)
    box.setSpecialValueText(special)
    box.setToolTip(tip)
    return box


def _fraction_box(name: str, low: float, high: float, step: float, tip: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setObjectName(name)
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setDecimals(2)
    box.setToolTip(tip)
    return box


def _toggle(text: str, name: str, tip: str) -> QCheckBox:
    toggle = QCheckBox(text)
    toggle.setObjectName(name)
    toggle.setToolTip(tip)
    return toggle


def _layers_box(name: str, tooltip: str) -> QSpinBox:
    box = _int_box(
        name,
        *INT_RANGES["models/target_gpu_layers"],
        tooltip + " −1 (All) offloads every layer; 0 keeps the model on the CPU.",
        special="All",
    )
    # Reload only when the user is done typing, not on every digit.
    box.setKeyboardTracking(False)
    return box


def _keep_number(box: QSpinBox | QDoubleSpinBox, settings: Settings, key: str) -> None:
    """Show the stored value, then store every change."""
    if isinstance(box, QDoubleSpinBox):
        box.setValue(settings.get_float(key))
        box.valueChanged.connect(lambda v: settings.set(key, float(v)))
    else:
        box.setValue(settings.get_int(key))
        box.valueChanged.connect(lambda v: settings.set(key, int(v)))


def _keep_toggle(toggle: QCheckBox, settings: Settings, key: str) -> None:
    """Show the stored value, store every change, and follow changes made elsewhere (the View
    menu's shading switch writes the same preference)."""
    toggle.setChecked(settings.get_bool(key))
    toggle.toggled.connect(lambda v: settings.set(key, bool(v)))
    settings.changed.connect(
        lambda changed: toggle.setChecked(settings.get_bool(key)) if changed == key else None
    )


class SettingsPanel(QWidget):
    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings

        self.target_layers = _layers_box("targetGpuLayers", "Target layers on the GPU.")
        self.draft_layers = _layers_box("draftGpuLayers", "Draft layers on the GPU.")
        self.context = _int_box(
            "contextControl",
            *INT_RANGES["models/n_ctx"],
            "Context size: how much of the conversation the models see. Larger holds longer "
            "chats and costs KV-cache memory in both models (see Memory).",
        )
        self.context.setSingleStep(1024)
        self.context.setSuffix(" tokens")
        self.context.setKeyboardTracking(False)
        self.threads = _int_box(
            "threadsControl",
            *INT_RANGES["models/n_threads"],
            "CPU threads per model. Auto: one per physical core that other programs leave "
            "free, re-checked while a reply runs, so a busy browser or build does not stall it.",
            special="Auto",
        )
        self.threads.setKeyboardTracking(False)
        self.prompt_cache = _int_box(
            "promptCacheControl",
            *INT_RANGES["models/prompt_cache_mib"],
            "Host memory for chats you left for another: going back to one restores the "
            "target's cache in milliseconds instead of reading the whole chat again. About "
            "23 KB a token for the demo model, 128 KB for an 8B model.",
            special="off",
        )
        self.prompt_cache.setSingleStep(256)
        self.prompt_cache.setSuffix(" MiB")
        self.prompt_cache.setKeyboardTracking(False)
        self.temperature = _fraction_box(
            "temperatureControl",
            *FLOAT_RANGES["generation/temperature"],
            0.1,
            "0 picks the most likely token (greedy); higher values sample more freely. "
            "Speculation keeps the output distribution exact either way.",
        )
        self.temperature.setSpecialValueText("0 (greedy)")
        self.top_p = _fraction_box(
            "topPControl",
            *FLOAT_RANGES["generation/top_p"],
            0.05,
            "Nucleus sampling: keep the most likely tokens up to this mass; 0 keeps only the "
            "most likely one.",
        )
        self.top_p.setSpecialValueText("0 (top token)")
        self.top_k = _int_box(
            "topKControl",
            *INT_RANGES["generation/top_k"],
            "Keep only the k most likely tokens (0 = off).",
            special="off",
        )
        self.seed = _int_box(
            "seedControl",
            *INT_RANGES["generation/seed"],
            "Fixed seed for sampled replies (-1 = random). With speculation off the same "
            "seed gives the same reply; with it on the drafts can differ from run to run, and "
            "so can the reply, drawn from the same distribution.",
            special="random",
        )
        self.max_tokens = _int_box(
            "maxTokensControl", *INT_RANGES["generation/max_tokens"], "Longest reply, in tokens."
        )
        self.exact = _toggle(
            "Exact greedy replies",
            "exactToggle",
            "llama.cpp rounds a one-token step slightly differently from a batch, so at a "
            "near-tie a greedy reply with speculation can differ from one without. With this "
            "on, every step checks two or more tokens: speculation never changes a greedy "
            "reply where llama.cpp rounds every batch alike (checked at the first exact reply, "
            "with a note if not), and plain steps cost 20-40% more on a CPU.",
        )
        self.with_history = _toggle(
            "Draft models use the chat history too",
            "draftWithHistoryToggle",
            "With a draft model chosen, also draft from what this chat and your past chats "
            "already hold, choosing each round whichever is expected to pay more (the hybrid). "
            "Off: the draft model alone. Changing it reloads the draft.",
        )
        self.highlight = _toggle(
            "Highlight accepted draft tokens", "highlightToggle", shading_legend()
        )
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("systemPromptInput")
        self.system_prompt.setPlaceholderText("System prompt (optional)")
        self.system_prompt.setMaximumHeight(90)
        # Tab moves on, as in the message box: typed here it would trap the keyboard and end
        # up in what the model is told.
        self.system_prompt.setTabChangesFocus(True)
        # Its only caption is the placeholder, gone once typed in; unnamed, a screen reader
        # falls back to the group's title.
        self.system_prompt.setAccessibleName("System prompt")

        box = QGroupBox("Settings")
        form = QFormLayout(box)
        numbers: tuple[tuple[str, QSpinBox | QDoubleSpinBox, str], ...] = (
            ("Target GPU layers", self.target_layers, "models/target_gpu_layers"),
            ("Draft GPU layers", self.draft_layers, "models/draft_gpu_layers"),
            ("Context", self.context, "models/n_ctx"),
            ("CPU threads", self.threads, "models/n_threads"),
            ("Chat cache", self.prompt_cache, "models/prompt_cache_mib"),
            ("Temperature", self.temperature, "generation/temperature"),
            ("Top-p", self.top_p, "generation/top_p"),
            ("Top-k", self.top_k, "generation/top_k"),
            ("Seed", self.seed, "generation/seed"),
            ("Max tokens", self.max_tokens, "generation/max_tokens"),
        )
        for label, number, key in numbers:
            form.addRow(label, number)
            _keep_number(number, settings, key)
        for toggle, key in (
            (self.with_history, "models/draft_with_history"),
            (self.exact, "generation/exact"),
            (self.highlight, "view/highlight_draft"),
        ):
            form.addRow(toggle)
            _keep_toggle(toggle, settings, key)
        form.addRow(self.system_prompt)
        self.system_prompt.setPlainText(settings.get_str("generation/system_prompt"))
        self.system_prompt.textChanged.connect(
            lambda: settings.set("generation/system_prompt", self.system_prompt.toPlainText())
        )
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(box)
        self.remote_workers = RemoteWorkersBox(settings)
        layout.addWidget(self.remote_workers)
