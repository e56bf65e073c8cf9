"""The Models dialog: the window's face of `models/`, as two tabs over one job helper.

`LocalModelsTab` lists every GGUF on disk with its verdicts and makes drafts; `DownloadTab`
fetches known pairs or any Hub repository's files. Both run their work through this dialog's
`Jobs` (ui.workers.jobs), so `busy` and `shutdown` cover everything the dialog started.

The window owns the preferences: it passes the user's extra folders in (`extra_dirs`) and
stores them again when `foldersChanged` fires; `modelsChanged` tells it to refresh its dropdowns;
`set_loaded` tells the dialog which files it has loaded, so they are marked and selected.
"""

# Qt signal names are camelCase, like Qt's own (foldersChanged beside clicked, finished).

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTabWidget, QVBoxLayout, QWidget

from models.discovery import ModelEntry
from ui.dialogs.download_tab import DownloadTab
from ui.dialogs.local_models_tab import LocalModelsOptions, LocalModelsTab
from ui.screen_fit import fit_to_screen
from ui.workers.jobs import Jobs

_JOB_THREADS = 4  # a scan, a details job, a listing and a download can run side by side


class ModelsDialog(QDialog):
    """Local GGUF files with their verdicts, "Make draft", and downloads from the Hub.

    Signals:
        modelsChanged(): a file was added, made or downloaded (the window refreshes its lists).
        foldersChanged(list): the user's extra folders (list[Path]) after an add or a remove.
    """

    modelsChanged = Signal()
    foldersChanged = Signal(list)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        loaded: tuple[Path | None, Path | None] = (None, None),
        **options: Unpack[LocalModelsOptions],
    ) -> None:
        """`options` go to the Local models tab (LocalModelsOptions).
        `drafts_dir`: where "Make draft" writes (default: the app's models folder).
        `hf_cache` / `lmstudio_dirs`: where to look besides (default: the usual places).
        `loaded`: the window's target and draft files, marked in the lists."""
        super().__init__(parent)
        self.setObjectName("modelsDialog")
        self.setWindowTitle("Models")
        self.resize(1100, 720)
        self._shown_before = False
        self._jobs = Jobs(self, threads=_JOB_THREADS)

        self.local = LocalModelsTab(self._jobs, **options)
        self.downloads = DownloadTab(self._jobs)
        self.local.modelsChanged.connect(self.modelsChanged)
        self.local.foldersChanged.connect(self.foldersChanged)
        self.downloads.downloaded.connect(self._on_downloaded)

        self.tabs = QTabWidget()
        self.tabs.addTab(self.local, "Local models")
        self.tabs.addTab(self.downloads, "Download")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(buttons)

        self.local.set_loaded(*loaded)
        self.local.refresh()

    @property
    def busy(self) -> bool:
        """True while any background job (scan, details, list, download, quantize) runs."""
        return self._jobs.busy

    @property
    def extra_dirs(self) -> list[Path]:
        return self.local.extra_dirs

    @property
    def entries(self) -> list[ModelEntry]:
        return self.local.entries

    def add_folder(self, folder: Path) -> None:
        self.local.add_folder(folder)

    def set_memory_settings(self, n_ctx: int, n_gpu_layers: int) -> None:
        self.local.set_memory_settings(n_ctx, n_gpu_layers)

    def set_loaded(self, target: Path | None, draft: Path | None) -> None:
        self.local.set_loaded(target, draft)

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Cancel a download and wait for the background jobs (the window calls it on exit)."""
        self.downloads.cancel_download()
        self._jobs.wait(timeout_ms)
        self._jobs.forget()

    def _on_downloaded(self, paths: list[Path]) -> None:
        self.local.show_landed(paths[0])
        self.modelsChanged.emit()

    # -- Qt overrides --------------------------------------------------------------------------

    def done(self, result: int) -> None:
        # Closing stops a download (the partial file is kept, the next try resumes it); a
        # quantization cannot be stopped and finishes unseen.
        self.downloads.cancel_download()
        super().done(result)

    def showEvent(self, event: QShowEvent) -> None:
        # The constructor scanned already; a reopened dialog looks again, since files may have
        # come or gone meanwhile (headers of unchanged files come from inspect's cache).
        if self._shown_before and not event.spontaneous():
            self.local.refresh()
        self._shown_before = True
        super().showEvent(event)
        # 720 px of content and a title bar do not fit a 720 px screen: Close must stay on it.
        fit_to_screen(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.downloads.cancel_download()
        super().closeEvent(event)
