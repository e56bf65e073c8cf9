"""Which models the worker holds and which the dropdowns offer; the window's model half.

Turns the user's choices (a target, a draft, an added file, new GPU layers) into load requests
for the engine thread, tracks what is loaded after each answer, and keeps the catalog of known
files (read in the helper process) current. It knows nothing of widgets: the window renders
its signals.
"""

# Qt signals keep Qt's camelCase (…Requested, …Changed), like Qt's own.

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from app.engine.model_host import LoadedState, LoadRequest, LoadTicket
from app.llama.config import ModelConfig
from app.llama.facts import NO_MEMORY, MemoryUsage
from models.demo import DemoModels
from models.library import save_library
from ui.messages import describe
from ui.settings import DRAFT_AUTO, DRAFT_NGRAM, DRAFT_NONE, Settings
from ui.window.added_files import AddedFiles
from ui.window.library_folders import keep_library_folders, library_folders
from ui.window.load_settings import draft_choice, model_config, unapplied_note
from ui.window.worker_return import WAITING_FOR_WORKERS, WORKERS_BACK, WorkerReturnWatch, workers_of
from ui.workers.catalog import Catalog, library_catalog
from ui.workers.engine_host import EngineHost
from ui.workers.jobs import Jobs
from ui.workers.requests import LoadFailure


class ModelSession(QObject):
    """Signals:
    loadingChanged(bool): a load started (True) or the last pending one ended (False).
    loadProgress(str, float): stage text and 0..1.
    modelsLoaded(LoadedState): after every load, failed or not: what is held now.
    catalogChanged(Catalog): the dropdowns' content, re-judged against the loaded target.
    errorRaised(str): one readable sentence.
    statusMessage(str): a passing note (a cancel, a file added).
    """

    loadingChanged = Signal(bool)
    loadProgress = Signal(str, float)
    modelsLoaded = Signal(object)
    catalogChanged = Signal(object)
    errorRaised = Signal(str)
    statusMessage = Signal(str)

    def __init__(
        self,
        settings: Settings,
        host: EngineHost,
        ops: Jobs,
        models_folder: Path,
        *,
        busy: Callable[[], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._settings = settings
        self._host = host
        self._ops = ops
        self._models_folder = models_folder
        self._busy = busy  # True while a reply is generated: loads wait for it
        self._loaded: LoadedState[DemoModels] | None = None
        self._memory: MemoryUsage | None = None  # reported since the last load, if any
        self._catalog: Catalog | None = None
        self._ticket: LoadTicket | None = None
        self._in_flight = 0
        self._reload_pending = False
        self._choice: tuple[str, str] | None = None
        # What was held when an RPC worker died with the models: what a reload loads again,
        # by itself once the workers answer.
        self._lost: tuple[str, str] | None = None
        self._workers_back = WorkerReturnWatch(ops, parent=self)
        self._workers_back.answered.connect(self._on_workers_back)
        self._adder = AddedFiles(self, settings, ops)
        self._format_told: str | None = None  # the target last told of its chat format
        self._context_told: str | None = None  # the last LoadedState.context_note told
        queued = Qt.ConnectionType.QueuedConnection
        worker = host.worker
        worker.loadProgress.connect(self.loadProgress, queued)
        worker.modelsLoaded.connect(self._on_models_loaded, queued)
        worker.loadFailed.connect(self._on_load_failed, queued)
        worker.modelsLost.connect(self._on_models_lost, queued)
        worker.memoryChanged.connect(self._on_memory_changed, queued)
        settings.changed.connect(self._on_setting_changed)
        self._save_library()

    # -- state --------------------------------------------------------------------------------

    @property
    def loaded(self) -> LoadedState[DemoModels] | None:
        return self._loaded

    @property
    def memory(self) -> MemoryUsage:
        """What the loaded models hold now: the load's figures, then each reply's report."""
        if self._memory is not None:
            return self._memory
        return self._loaded.memory if self._loaded is not None else NO_MEMORY

    @property
    def catalog(self) -> Catalog | None:
        return self._catalog

    @property
    def busy(self) -> bool:
        """A reply (or a local server request) is being generated: loads wait for it."""
        return self._busy()

    @property
    def loading(self) -> bool:
        return self._in_flight > 0

    @property
    def target_path(self) -> str | None:
        loaded = self._loaded
        return loaded.target.path if loaded and loaded.target else None

    @property
    def draft_value(self) -> str:
        """The loaded draft as the draft dropdown and the preferences name it."""
        loaded = self._loaded
        if loaded is None or loaded.draft.kind == "none":
            return DRAFT_NONE
        if loaded.draft.kind == "ngram":
            return DRAFT_NGRAM
        return loaded.draft.path or DRAFT_NONE

    # -- loading ------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the preferred models (the demo pair when nothing is configured)."""
        target = self._settings.get_str("models/target")
        self._request(target or None, self._settings.get_str("models/draft"), remember=False)

    def choose_target(self, path: str) -> None:
        self._request(path, self.draft_for(path))

    def choose_draft(self, value: str) -> None:
        target = self.target_path
        if target is None:
            return
        self._request(target, value)

    def draft_for(self, target: str) -> str:
        """The draft to load with a newly chosen target.

        The one last used with that target if it still suits, else the current draft if it
        shares the target's vocabulary, else the smallest compatible file the catalog knows,
        else the chat history: a target change never silently leaves speculation without a
        draft.
        """
        remembered = _draft_memory(self._settings).get(target)
        current = self.draft_value
        if remembered in (DRAFT_NGRAM, DRAFT_NONE):
            return remembered
        for candidate in (remembered, current):
            if candidate and self._suits_as_draft(target, candidate):
                return candidate
        if current in (DRAFT_NGRAM, DRAFT_NONE):  # drafting from the chat, or none: as chosen
            return current
        for model in self._catalog.models if self._catalog else []:
            if self._suits_as_draft(target, model.path):
                return model.path
        return DRAFT_NGRAM  # no draft model suits: the chat history drafts for any target

    def reload(self) -> None:
        """Load the same models again (new GPU layers, threads or workers); after the reply or
        the load in flight, if any. After a worker died with the models, the models it held
        are loaded again."""
        if self._busy() or self.loading:
            # Asked before what is held is known (the first load): the load's end decides.
            self._reload_pending = True
            return
        held = self.target_path
        wanted = (held, self.draft_value) if held is not None else self._lost
        if wanted is not None:
            self._request(*wanted)

    def run_pending(self) -> None:
        """Called when a reply or a load ends: do the reload it held back."""
        if self._reload_pending:
            self._reload_pending = False
            self.reload()

    def cancel(self) -> None:
        if self._ticket is not None:
            self._ticket.cancel()

    def _model_config(self, path: str, *, draft: bool) -> ModelConfig:
        return model_config(self._settings, path, draft=draft, warn=self.errorRaised.emit)

    def _request(self, target: str | None, draft_value: str, *, remember: bool = True) -> None:
        self._workers_back.stop()  # the user's choice, or the reload it waited for
        ticket = LoadTicket()
        self._ticket = ticket
        # Remembered only once loaded: a file that fails (or takes the process down) while
        # loading must not become the model the next start tries first.
        self._choice = (target, draft_value) if remember and target is not None else None
        request = LoadRequest(
            target=None if target is None else self._model_config(target, draft=False),
            draft=draft_choice(
                self._settings, draft_value, demo=target is None, warn=self.errorRaised.emit
            ),
            ticket=ticket,
            demo_folder=self._models_folder / "demo",
            demo_target=self._model_config("", draft=False),
            demo_draft=self._model_config("", draft=True),
            demo_draft_with_history=self._settings.get_bool("models/draft_with_history"),
        )
        self._in_flight += 1
        if self._in_flight == 1:
            self.loadingChanged.emit(True)
        self._host.request_load(request)

    def _on_models_loaded(self, state: LoadedState[DemoModels]) -> None:
        self._after_load(state)

    def _on_models_lost(self, state: LoadedState[DemoModels]) -> None:
        held = self._loaded
        if held is not None and held.target is not None:
            self._lost = (held.target.path, self.draft_value)
            self._workers_back.watch(workers_of(held))
        self._hold(state)
        self.modelsLoaded.emit(state)
        if self._workers_back.watching:
            self.statusMessage.emit(WAITING_FOR_WORKERS)

    def _on_workers_back(self) -> None:
        if self._lost is not None and self.target_path is None:
            self.statusMessage.emit(WORKERS_BACK)
            self.reload()

    def _hold(self, state: LoadedState[DemoModels]) -> None:
        self._loaded = state
        self._memory = None  # the load's own figures until the next reply reports

    def _on_memory_changed(self, usage: MemoryUsage) -> None:
        # The worker reports in order, so this follows the load that holds these models.
        if self._loaded is not None and self._loaded.target is not None:
            self._memory = usage

    def _on_load_failed(self, failure: LoadFailure) -> None:
        self._choice = None
        if failure.cancelled:
            target = failure.state.target
            note = unapplied_note(self._settings, target) if target is not None else ""
            self.statusMessage.emit(failure.message + note)
        else:
            self.errorRaised.emit(failure.message)
        self._after_load(failure.state)

    def _after_load(self, state: LoadedState[DemoModels]) -> None:
        self._in_flight -= 1
        self._hold(state)
        if state.target is not None:
            self._lost = None
        self._remember_choice(state)
        if self._in_flight == 0:
            self._ticket = None
        self.modelsLoaded.emit(state)
        if self._in_flight == 0 and not self._busy():
            # Before loadingChanged(False): a message waiting for the load must wait for this
            # reload too, or its reply would run on models without the new setting.
            self.run_pending()
        if self._in_flight == 0:
            self.loadingChanged.emit(False)
            self.refresh_catalog()

    def _remember_choice(self, state: LoadedState[DemoModels]) -> None:
        choice, self._choice = self._choice, None
        if state.target is None:
            return
        target = state.target.path
        if choice is not None and choice[0] == target:
            self._settings.set("models/target", target)
            self._settings.set("models/draft", self.draft_value)
        memory = _draft_memory(self._settings)
        memory[target] = self.draft_value
        self._settings.set(
            "models/draft_by_target", [f"{t}\t{d}" for t, d in sorted(memory.items())]
        )

    # -- the catalog --------------------------------------------------------------------------

    def new_context_note(self, state: LoadedState[DemoModels]) -> str | None:
        """The load's context note, once per target and context, not again on every reload."""
        note = state.context_note
        fresh = note if note != self._context_told else None
        self._context_told = note
        return fresh

    def refresh_catalog(self) -> None:
        """Re-read the known files and re-judge the drafts, in the helper process (walking
        folders and reading headers is work of unknown size that must not stall the UI)."""
        demo = self._loaded.demo if self._loaded else None
        demo_paths = [str(p) for p in (demo.f32, *demo.drafts.values())] if demo else []
        # Drafts in use or remembered stay listed wherever they live, or a restart or a target
        # round trip would lose them from the dropdown and pick another draft.
        used = [self.draft_value, *_draft_memory(self._settings).values()]
        kept = [p for p in used if p not in (DRAFT_NGRAM, DRAFT_NONE, DRAFT_AUTO)]
        self._ops.run_in_process(
            functools.partial(
                library_catalog,
                self.library_folders(),
                [*demo_paths, *(p for p in kept if Path(p).is_file())],
                self.target_path,
                self._models_folder,
            ),
            self._on_catalog,
            self._on_failed,
        )

    def _on_catalog(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.catalogChanged.emit(catalog)
        self._say_chat_format(catalog)

    def _say_chat_format(self, catalog: Catalog) -> None:
        """Once per target: a file without a chat template is chatted in a format chosen for
        it, and the user is told which (a warning when it is only a guess)."""
        target = catalog.target
        if target is None or target.path == self._format_told:
            return
        self._format_told = target.path
        chosen = target.builtin_format
        if chosen is None:
            return
        name = Path(target.path).name
        if chosen.trained:
            self.statusMessage.emit(
                f"{name} has no chat template: chatting in the {chosen.name} turn format its "
                "vocabulary was trained on."
            )
        else:
            self.errorRaised.emit(
                f"{name} has no chat template and its vocabulary matches no known chat format: "
                "chatting in ChatML, which it may not have been trained on."
            )

    def _suits_as_draft(self, target: str, draft: str) -> bool:
        """Smaller, with an identical vocabulary, as far as the catalog knows; the worker
        re-checks on load."""
        files = {m.path: m for m in (self._catalog.models if self._catalog else [])}
        t, d = files.get(target), files.get(draft)
        return (
            t is not None
            and d is not None
            and d.size_bytes < t.size_bytes
            and t.tokenizer_fingerprint == d.tokenizer_fingerprint
        )

    # -- the library's folders -----------------------------------------------------------------

    def library_folders(self) -> list[Path]:
        return library_folders(self._settings, self._models_folder)

    def _on_setting_changed(self, key: str) -> None:
        if key in ("models/extra_files", "models/extra_folders"):
            self._save_library()

    def _save_library(self) -> None:
        try:
            save_library(self.library_folders())
        except OSError as exc:  # `models list` then misses them; the window does not
            self.statusMessage.emit(f"Could not save the library's folder list: {exc}")

    def keep_library_folders(self, places: list[Path]) -> None:
        keep_library_folders(self._settings, self._models_folder, places)

    # -- files the user adds ------------------------------------------------------------------

    def add_files(self, paths: list[str]) -> None:
        """Vet each file in the helper process and put the good ones to use (AddedFiles)."""
        self._adder.add(paths)

    def _on_failed(self, exc: Exception) -> None:
        self.errorRaised.emit(describe(exc))


def _draft_memory(settings: Settings) -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in settings.get_list("models/draft_by_target"))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}
