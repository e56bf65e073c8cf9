"""The bar above the conversation: target and draft dropdowns, speculation toggle, γ.

Filled from a Catalog (ui/workers/catalog.py). Incompatible drafts stay visible but disabled,
with the reason as their tooltip, so the user learns why a file is not offered rather than
missing it.
"""

# Qt signals keep Qt's camelCase (…Requested, …Changed), like Qt's own.

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from app.llama.resources import format_bytes
from app.paths import same_file
from ui.file_labels import telling_folders
from ui.named_widgets import push_button
from ui.settings import DRAFT_NGRAM, DRAFT_NONE
from ui.widgets.gamma_box import GammaBox
from ui.widgets.inputs import ElidedComboBox, ElidedLabel
from ui.workers.catalog import Catalog

NGRAM_LABEL = "Chat history (no draft model)"
SPECULATION_LABEL = "Speculation"
SPECULATION_TIP = (
    "Speculative decoding on or off. Takes effect from the next round, even mid-reply."
)
NO_DRAFT_LABEL = "Speculation (no draft)"
NO_DRAFT_TIP = "No draft is loaded, so replies run plain: choose a draft to speculate."
NONE_LABEL = "No draft"
PATH_ROLE = Qt.ItemDataRole.UserRole


def _entry_label(path: str, size: int, quantization: str) -> str:
    # Size and type first: a narrow dropdown cuts the end of its text, and these are what
    # tell one file of a family from the next.
    return f"{format_bytes(size)} · {quantization} · {Path(path).stem}"


def _entry_labels(files: list[tuple[str, int, str]]) -> list[str]:
    """One label per (path, size, quantization), the folders added where two read alike."""
    labels = [_entry_label(*file) for file in files]
    folders = telling_folders(labels, [path for path, _, _ in files])
    return [
        label if where is None else f"{label} · in {where}"
        for label, where in zip(labels, folders, strict=True)
    ]


class ModelControls(QWidget):
    """Signals:
    targetChosen(str): the user picked a target file.
    draftChosen(str): a draft path, DRAFT_NGRAM or DRAFT_NONE.
    speculationToggled(bool), gammaChanged(int) (0 = Auto), addModelsRequested().
    """

    targetChosen = Signal(str)
    draftChosen = Signal(str)
    speculationToggled = Signal(bool)
    gammaChanged = Signal(int)
    addModelsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.target_combo = ElidedComboBox()
        self.target_combo.setObjectName("targetModelCombo")
        self.target_combo.set_base_tooltip("Target model: the model whose answers you get.")
        self.draft_combo = ElidedComboBox()
        self.draft_combo.setObjectName("draftModelCombo")
        self.draft_combo.set_base_tooltip(
            "Draft: a smaller model with the same vocabulary that guesses ahead (together with "
            "the chat history unless Settings turns that off), or the chat history alone. Sorted "
            "by size; incompatible files are greyed out (hover for the reason)."
        )
        for combo in (self.target_combo, self.draft_combo):
            combo.setModel(QStandardItemModel(combo))
        self.speculation = QCheckBox(SPECULATION_LABEL)
        self.speculation.setObjectName("speculationToggle")
        self.speculation.setToolTip(SPECULATION_TIP)
        self.gamma = GammaBox()
        self.add_button = push_button(
            "Add GGUF…",
            "addModelButton",
            "Add your own GGUF model files (or drop them on the window).",
        )

        # A long headline ends in "…" at the row's end, never widens the window; the tooltip
        # has it all.
        self.headline = ElidedLabel()
        self.headline.setObjectName("speedupHeadline")
        self.headline.setMinimumWidth(40)

        # Two rows so that both dropdowns get room for a file name on a 1280-wide screen.
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        model_row = QHBoxLayout()
        # Buddies name the dropdowns for a screen reader, which would otherwise read out the
        # current file as if it were the control's name.
        for caption, combo in (("Target", self.target_combo), ("Draft", self.draft_combo)):
            label = QLabel(caption)
            label.setBuddy(combo)
            model_row.addWidget(label)
            model_row.addWidget(combo, 1)
        model_row.addWidget(self.add_button)
        self.option_row = QHBoxLayout()
        self.option_row.addWidget(self.speculation)
        self.option_row.addWidget(self.gamma)
        self.option_row.addSpacing(12)
        self.option_row.addWidget(self.headline, 1)
        layout.addLayout(model_row)
        layout.addLayout(self.option_row)

        self.target_combo.activated.connect(self._on_target_activated)
        self.draft_combo.activated.connect(self._on_draft_activated)
        self.speculation.toggled.connect(self.speculationToggled)
        self.gamma.valueChanged.connect(self.gammaChanged)
        self.add_button.clicked.connect(self.addModelsRequested)

    # -- filling ------------------------------------------------------------------------------

    def set_catalog(self, catalog: Catalog, target_path: str, draft_value: str) -> None:
        """Repopulate both dropdowns and select the given target and draft."""
        target_model = self._model(self.target_combo)
        target_model.clear()
        labels = _entry_labels([(e.path, e.size_bytes, e.quantization) for e in catalog.models])
        for entry, label in zip(catalog.models, labels, strict=True):
            item = QStandardItem(label)
            item.setData(entry.path, PATH_ROLE)
            item.setToolTip(f"{entry.name} ({entry.architecture}), {entry.path}")
            target_model.appendRow(item)
        self.select_target(target_path)

        draft_model = self._model(self.draft_combo)
        draft_model.clear()
        labels = _entry_labels([(d.path, d.size_bytes, d.quantization) for d in catalog.drafts])
        for option, label in zip(catalog.drafts, labels, strict=True):
            item = QStandardItem(label)
            item.setData(option.path, PATH_ROLE)
            if option.compatible:
                item.setToolTip(f"{option.note}. {option.path}")
            else:
                item.setEnabled(False)
                item.setToolTip(f"Not compatible with the target: {option.reason}.")
            draft_model.appendRow(item)
        for label, value, tip in (
            (
                NGRAM_LABEL,
                DRAFT_NGRAM,
                "Drafts by copying what followed the last few tokens earlier in this chat or "
                "in your past chats. No second model, no extra memory.",
            ),
            (NONE_LABEL, DRAFT_NONE, "No drafter: plain decoding, no extra memory."),
        ):
            item = QStandardItem(label)
            item.setData(value, PATH_ROLE)
            item.setToolTip(tip)
            draft_model.appendRow(item)
        self.select_draft(draft_value)

    @staticmethod
    def _model(combo: QComboBox) -> QStandardItemModel:
        model = combo.model()
        assert isinstance(model, QStandardItemModel)
        return model

    def show_headline(self, text: str, tooltip: str = "") -> None:
        """The plain-words result of speculation, e.g. "1.3× faster than without a draft"."""
        self.headline.setText(text)
        # The row may cut a long headline: the tooltip always holds all of it.
        self.headline.setToolTip(f"{text}\n\n{tooltip}" if text and tooltip else text or tooltip)

    def set_draft_loaded(self, loaded: bool) -> None:
        """Say on the toggle itself when there is nothing to speculate with; the user's
        on/off choice is kept for when a draft comes back."""
        self.speculation.setText(SPECULATION_LABEL if loaded else NO_DRAFT_LABEL)
        self.speculation.setToolTip(SPECULATION_TIP if loaded else NO_DRAFT_TIP)

    def select_target(self, path: str) -> None:
        _select(self.target_combo, path)

    def select_draft(self, value: str) -> None:
        _select(self.draft_combo, value)

    # -- reading ------------------------------------------------------------------------------

    def draft_entries(self) -> list[tuple[str, str, bool, str]]:
        """(label, value, enabled, tooltip) per draft entry, for tests and accessibility."""
        model = self._model(self.draft_combo)
        out = []
        for row in range(model.rowCount()):
            item = model.item(row)
            out.append((item.text(), str(item.data(PATH_ROLE)), item.isEnabled(), item.toolTip()))
        return out

    def _on_target_activated(self, index: int) -> None:
        value = self.target_combo.itemData(index, PATH_ROLE)
        if value is not None:
            self.targetChosen.emit(str(value))

    def _on_draft_activated(self, index: int) -> None:
        value = self.draft_combo.itemData(index, PATH_ROLE)
        if value is not None:
            self.draftChosen.emit(str(value))


def _select(combo: QComboBox, value: str) -> None:
    blocked = combo.blockSignals(True)
    try:
        for row in range(combo.count()):
            if _same(str(combo.itemData(row, PATH_ROLE)), value):
                combo.setCurrentIndex(row)
                return
        combo.setCurrentIndex(-1)
    finally:
        combo.blockSignals(blocked)


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    if not a or not b or DRAFT_NGRAM in (a, b):
        return False
    return same_file(Path(a), Path(b))
