"""Files the user adds (Add GGUF…, Ctrl+O, a drop on the window): vetted in the helper
process, remembered, and put to use without swapping models mid-chat.

A file compatible with the loaded target and smaller becomes the draft; with no target loaded,
a model becomes the target. Any other file is added to the dropdowns for the user to pick.
Files added together are judged together: every broken one's reason shows at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ui.messages import describe
from ui.settings import Settings
from ui.workers.catalog import Vetted, vet_new_file
from ui.workers.jobs import Jobs

if TYPE_CHECKING:
    from ui.window.model_session import ModelSession


@dataclass
class _Batch:
    pending: int
    problems: list[str] = field(default_factory=list)


class AddedFiles:
    def __init__(self, session: ModelSession, settings: Settings, ops: Jobs) -> None:
        self._session = session
        self._settings = settings
        self._ops = ops

    def add(self, paths: list[str]) -> None:
        batch = _Batch(len(paths))
        for path in paths:
            self._ops.run_in_process(
                functools.partial(vet_new_file, path, self._session.target_path),
                functools.partial(self._on_vetted, batch),
                functools.partial(self._on_failed, batch),
            )

    def _on_failed(self, batch: _Batch, exc: Exception) -> None:
        self._judged(batch, describe(exc))

    def _judged(self, batch: _Batch, problem: str | None) -> None:
        # Reported when the whole batch is judged: one message each would replace the last.
        if problem is not None:
            batch.problems.append(problem)
        batch.pending -= 1
        if batch.pending == 0 and batch.problems:
            self._session.errorRaised.emit("\n".join(batch.problems))

    def _on_vetted(self, batch: _Batch, vetted: Vetted) -> None:
        self._judged(batch, vetted.message)
        if vetted.message is not None:
            return
        session = self._session
        extra = self._settings.get_list("models/extra_files")
        if vetted.path not in extra:
            self._settings.set("models/extra_files", [*extra, vetted.path])
        name = Path(vetted.path).name
        if session.busy or session.loading:
            session.statusMessage.emit(f"Added {name}; choose it above when the reply ends.")
            session.refresh_catalog()
        elif vetted.as_draft and session.target_path is not None:
            session.statusMessage.emit(f"Added {name} as the draft.")
            session.choose_draft(vetted.path)
        elif session.target_path is None:
            session.statusMessage.emit(f"Added {name} as the target.")
            session.choose_target(vetted.path)
        else:
            session.statusMessage.emit(
                f"Added {name}. It cannot draft for the current target: choose it under "
                "Target to switch to it."
            )
            session.refresh_catalog()
