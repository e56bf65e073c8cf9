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

from ui.settings import Settings
from ui.widgets.remote_workers import RemoteWorkersBox
from ui.widgets.rendering import shading_legend

_MAX_SEED = 2**31 - 1


def _layers_box(name: str, tooltip: str) -> QSpinBox:
    box = QSpinBox()
    box.setObjectName(name)
    box.setRange(-1, 999)
    box.setSpecialValueText("All")
    box.setToolTip(tooltip + " −1 (All) offloads every layer; 0 keeps the model on the CPU.")
    # Reload only when the user is done typing, not on every digit.
    box.setKeyboardTracking(False)
    return box


class SettingsPanel(QWidget):
    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings

        self.target_layers = _layers_box("targetGpuLayers", "Target layers on the GPU.")
        self.draft_layers = _layers_box("draftGpuLayers", "Draft layers on the GPU.")
        self.context = QSpinBox()
        self.context.setObjectName("contextControl")
        self.context.setRange(256, 131072)
        self.context.setSingleStep(1024)
        self.context.setSuffix(" tokens")
        self.context.setKeyboardTracking(False)
        self.context.setToolTip(
            "Context size: how much of the conversation the models see. Larger holds longer "
            "chats and costs KV-cache memory in both models (see Memory)."
        )
        self.threads = QSpinBox()
        self.threads.setObjectName("threadsControl")
        self.threads.setRange(0, 256)
        self.threads.setSpecialValueText("Auto")
        self.threads.setKeyboardTracking(False)
        self.threads.setToolTip(
            "CPU threads per model. Auto: one per physical core that other programs leave "
            "free, re-checked while a reply runs, so a busy browser or build does not stall it."
        )
        self.temperature = QDoubleSpinBox()
        self.temperature.setObjectName("temperatureControl")
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setSpecialValueText("0 (greedy)")
        self.temperature.setToolTip(
            "0 picks the most likely token (greedy); higher values sample more freely. "
            "Speculation keeps the output distribution exact either way."
        )
        self.top_p = QDoubleSpinBox()
        self.top_p.setObjectName("topPControl")
        self.top_p.setRange(0.01, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setDecimals(2)
        self.top_p.setToolTip("Nucleus sampling: keep the most likely tokens up to this mass.")
        self.top_k = QSpinBox()
        self.top_k.setObjectName("topKControl")
        self.top_k.setRange(0, 1000)
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Keep only the k most likely tokens (0 = off).")
        self.seed = QSpinBox()
        self.seed.setObjectName("seedControl")
        self.seed.setRange(-1, _MAX_SEED)
        self.seed.setSpecialValueText("random")
        self.seed.setToolTip("Fixed seed for reproducible sampled replies (-1 = random).")
        self.max_tokens = QSpinBox()
        self.max_tokens.setObjectName("maxTokensControl")
        self.max_tokens.setRange(1, 8192)
        self.max_tokens.setToolTip("Longest reply, in tokens.")
        self.exact = QCheckBox("Exact greedy replies")
        self.exact.setObjectName("exactToggle")
        self.exact.setToolTip(
            "llama.cpp rounds a one-token step slightly differently from a batch, so at a "
            "near-tie a greedy reply with speculation can differ from one without. With this "
            "on, every step checks two or more tokens: speculation never changes a greedy "
            "reply, and plain steps cost 20-40% more on a CPU."
        )
        self.highlight = QCheckBox("Highlight accepted draft tokens")
        self.highlight.setObjectName("highlightToggle")
        self.highlight.setToolTip(shading_legend())
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("systemPromptInput")
        self.system_prompt.setPlaceholderText("System prompt (optional)")
        self.system_prompt.setMaximumHeight(90)

        box = QGroupBox("Settings")
        form = QFormLayout(box)
        form.addRow("Target GPU layers", self.target_layers)
        form.addRow("Draft GPU layers", self.draft_layers)
        form.addRow("Context", self.context)
        form.addRow("CPU threads", self.threads)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow(self.exact)
        form.addRow(self.highlight)
        form.addRow(self.system_prompt)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(box)
        self.remote_workers = RemoteWorkersBox(settings)
        layout.addWidget(self.remote_workers)

        s = settings
        self.target_layers.setValue(s.get_int("models/target_gpu_layers"))
        self.draft_layers.setValue(s.get_int("models/draft_gpu_layers"))
        self.context.setValue(s.get_int("models/n_ctx"))
        self.threads.setValue(s.get_int("models/n_threads"))
        self.temperature.setValue(s.get_float("generation/temperature"))
        self.top_p.setValue(s.get_float("generation/top_p"))
        self.top_k.setValue(s.get_int("generation/top_k"))
        self.seed.setValue(s.get_int("generation/seed"))
        self.max_tokens.setValue(s.get_int("generation/max_tokens"))
        self.exact.setChecked(s.get_bool("generation/exact"))
        self.highlight.setChecked(s.get_bool("view/highlight_draft"))
        self.system_prompt.setPlainText(s.get_str("generation/system_prompt"))

        self.target_layers.valueChanged.connect(lambda v: s.set("models/target_gpu_layers", int(v)))
        self.draft_layers.valueChanged.connect(lambda v: s.set("models/draft_gpu_layers", int(v)))
        self.context.valueChanged.connect(lambda v: s.set("models/n_ctx", int(v)))
        self.threads.valueChanged.connect(lambda v: s.set("models/n_threads", int(v)))
        self.temperature.valueChanged.connect(lambda v: s.set("generation/temperature", float(v)))
        self.top_p.valueChanged.connect(lambda v: s.set("generation/top_p", float(v)))
        self.top_k.valueChanged.connect(lambda v: s.set("generation/top_k", int(v)))
        self.seed.valueChanged.connect(lambda v: s.set("generation/seed", int(v)))
        self.max_tokens.valueChanged.connect(lambda v: s.set("generation/max_tokens", int(v)))
        self.exact.toggled.connect(lambda v: s.set("generation/exact", bool(v)))
        self.highlight.toggled.connect(lambda v: s.set("view/highlight_draft", bool(v)))
        self.system_prompt.textChanged.connect(
            lambda: s.set("generation/system_prompt", self.system_prompt.toPlainText())
        )
