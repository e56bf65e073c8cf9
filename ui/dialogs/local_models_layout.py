"""The Local models tab's widgets and their layout; what they do is LocalModelsTab's
(ui/dialogs/local_models_tab.py), as the window's behaviour sits on ui/window/layout.py."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from models.quantize import FTYPES
from ui.dialogs.model_details import ModelDetailsPane
from ui.dialogs.tables import make_table
from ui.named_widgets import named_label, push_button

# Offered for "Make draft", smallest useful first after the usual choice. Float types are left
# out: a draft in F16/F32 is never smaller than its target, so it cannot speed anything up.
DRAFT_TYPES: tuple[str, ...] = tuple(
    t for t in ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q2_K") if t in FTYPES
)
_NAME_MAX_PX = 380  # a longer file name is elided rather than pushing the figures out of view
MODEL_COLUMNS = (
    "Name",
    "In use",
    "Source",
    "Architecture",
    "Quantization",
    "Params",
    "Size",
    "Context",
    "Vocab",
    "Status",
)


def _button(row: QHBoxLayout, text: str, name: str) -> QPushButton:
    button = push_button(text, name)
    row.addWidget(button)
    return button


class LocalModelsLayout(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("localTab")
        top = QHBoxLayout()
        self.refresh_button = _button(top, "Refresh", "refreshButton")
        self.add_folder_button = _button(top, "Add folder…", "addFolderButton")
        self.add_file_button = _button(top, "Add file…", "addFileButton")
        self.remove_folder_button = _button(top, "Remove folder", "removeFolderButton")
        self.scan_label = named_label("scanLabel")
        top.addStretch(1)
        top.addWidget(self.scan_label)

        self.folder_list = QListWidget()
        self.folder_list.setObjectName("folderList")
        # Lists and tables have no caption beside them: a screen reader needs their names.
        self.folder_list.setAccessibleName("Searched folders and files")
        self.folder_list.setMaximumHeight(56)
        self.folder_list.setToolTip(
            "Folders and single files searched besides the app's own folder and the usual places"
        )

        # Names and figures take the width they need (a name up to a cap, whole in its
        # tooltip beyond); the status takes the rest.
        self.models_table = make_table(
            MODEL_COLUMNS, "modelsTable", stretch=(9,), fit=tuple(range(9))
        )
        self.models_table.horizontalHeader().setMaximumSectionSize(_NAME_MAX_PX)
        self.models_table.setAccessibleName("Models found")
        self.details = ModelDetailsPane()

        self.draft_type_combo = QComboBox()
        self.draft_type_combo.setObjectName("draftTypeCombo")
        self.draft_type_combo.addItems(list(DRAFT_TYPES))
        self.draft_type_combo.setCurrentText("Q4_0")
        self.make_draft_button = push_button(
            "Make draft",
            "makeDraftButton",
            "Re-quantize the selected model into a smaller file of the same vocabulary",
        )
        self.quantize_busy = QProgressBar()
        self.quantize_busy.setObjectName("quantizeBusy")
        self.quantize_busy.setRange(0, 0)  # quantize_gguf reports no progress: a busy bar
        self.quantize_busy.setMaximumWidth(120)
        self.quantize_busy.setVisible(False)
        self.local_status_label = named_label("localStatusLabel", wrap=True)
        make_row = QHBoxLayout()
        make_label = QLabel("Make a draft of the selected model, type")
        # The buddy names the combo; unnamed, a screen reader reads its value ("Q4_0").
        make_label.setBuddy(self.draft_type_combo)
        make_row.addWidget(make_label)
        make_row.addWidget(self.draft_type_combo)
        make_row.addWidget(self.make_draft_button)
        make_row.addWidget(self.quantize_busy)
        make_row.addWidget(self.local_status_label, 1)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.models_table)
        split.addWidget(self.details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.folder_list)
        layout.addWidget(split, 1)
        layout.addLayout(make_row)
