"""The window's dialogs: the Models library (made once, kept) and Compare drafts (one per run).

Both work on the window's own loaded models through ModelSession and the engine host; the
launcher only decides when they may open and keeps them in step with what is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QFileDialog, QWidget

from ui.dialogs.compare_dialog import CompareDialog
from ui.dialogs.models_dialog import ModelsDialog
from ui.settings import DRAFT_NGRAM, DRAFT_NONE, Settings
from ui.window.chat_controller import ChatController
from ui.window.compare import NOT_ON_WORKERS, compare_bench
from ui.window.model_session import ModelSession
from ui.workers.engine_host import EngineHost


class DialogLauncher(QObject):
    def __init__(
        self,
        window: QWidget,
        *,
        settings: Settings,
        models: ModelSession,
        chat: ChatController,
        host: EngineHost,
        models_folder: Path,
        show_error: Callable[[str], None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._settings = settings
        self._models = models
        self._chat = chat
        self._host = host
        self._models_folder = models_folder
        self._show_error = show_error
        # Made on first use: the Models dialog scans the disk as soon as it exists.
        self.models_dialog: ModelsDialog | None = None
        self.compare_dialog: CompareDialog | None = None
        models.loadingChanged.connect(self._tell_compare)

    def pick_model_files(self) -> list[str]:
        """GGUF files the user picks in a file dialog opened where the last ones came from."""
        folder = self._settings.get_str("models/last_folder") or str(Path.home())
        paths, _filter = QFileDialog.getOpenFileNames(
            self._window, "Add GGUF model files", folder, "GGUF models (*.gguf);;All files (*)"
        )
        if paths:
            self._settings.set("models/last_folder", str(Path(paths[0]).parent))
        return list(paths)

    def open_models(self) -> ModelsDialog:
        settings = self._settings
        dialog = self.models_dialog
        if dialog is None:
            dialog = ModelsDialog(
                self._window,
                extra_dirs=self._models.library_folders(),
                n_ctx=settings.get_int("models/n_ctx"),
                n_gpu_layers=settings.get_int("models/target_gpu_layers"),
                drafts_dir=self._models_folder,  # made drafts land where the dropdowns look
                loaded=self.loaded_files(),
            )
            dialog.foldersChanged.connect(self._models.keep_library_folders)
            dialog.modelsChanged.connect(self._models.refresh_catalog)
            self.models_dialog = dialog
        else:
            dialog.set_memory_settings(
                settings.get_int("models/n_ctx"), settings.get_int("models/target_gpu_layers")
            )
            dialog.set_loaded(*self.loaded_files())
            # Files dropped on the window since the dialog was made: their folders too.
            known = dialog.extra_dirs
            for folder in self._models.library_folders():
                if folder not in known:
                    dialog.add_folder(folder)
        if dialog.isVisible():
            # Open already, maybe behind the window: bring it to the front.
            dialog.raise_()
            dialog.activateWindow()
        else:
            dialog.show()
        return dialog

    def models_changed(self) -> None:
        """The loaded pair changed: the Models dialog's "In use" marks follow it."""
        if self.models_dialog is not None:
            self.models_dialog.set_loaded(*self.loaded_files())

    def loaded_files(self) -> tuple[Path | None, Path | None]:
        """The loaded target and draft files, for the Models dialog to mark."""
        target, draft = self._models.target_path, self._models.draft_value
        is_file = draft not in (DRAFT_NONE, DRAFT_NGRAM)
        return (Path(target) if target else None, Path(draft) if is_file else None)

    def open_compare(self) -> CompareDialog | None:
        """Compare on the chat's last prompt; None (with a sentence) when it cannot run."""
        prompt = self._chat.last_prompt()
        if prompt is None:
            return None
        loaded = self._models.loaded
        if loaded is not None and loaded.remote:
            self._show_error(NOT_ON_WORKERS)
            return None
        run = compare_bench(loaded, self._models.catalog, self._settings, self._host)
        if run is None:
            self._show_error("No compatible draft is installed to compare with the target.")
            return None
        dialog = CompareDialog(run, self._window, prompt)
        dialog.draftChosen.connect(self._models.choose_draft)
        # Window-modal: no reply can start while the comparison measures.
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(self._forget_compare)
        self.compare_dialog = dialog
        dialog.show()
        return dialog

    def _forget_compare(self) -> None:
        self.compare_dialog = None

    def _tell_compare(self, loading: bool) -> None:
        # "Use this draft" said the draft was loading; once the window's load has ended, the
        # dialog says whether it is the chat's draft now.
        if not loading and self.compare_dialog is not None:
            self.compare_dialog.chat_draft_loaded(self._models.draft_value)

    def shutdown(self, timeout_ms: int) -> None:
        if self.compare_dialog is not None:
            self.compare_dialog.close()  # stops its comparison and waits for it to end
        if self.models_dialog is not None:
            self.models_dialog.shutdown(timeout_ms)


def dropped_ggufs(urls: list[Any]) -> list[str]:
    """The local .gguf files among URLs dropped on the window."""
    return [
        u.toLocalFile()
        for u in urls
        if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf")
    ]
