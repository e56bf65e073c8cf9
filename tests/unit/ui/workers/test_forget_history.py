"""Deleting chats while the models run on RPC workers (a session in a child process, which
drafts from no past chats) still deletes the past-chats indexes on disk that hold them."""

from __future__ import annotations

from pathlib import Path

from app.engine.history_corpus import HistoryCorpus
from app.engine.session import EngineSession
from ui.workers.engine import forget_history


class _ChildSession:
    """Stands for IsolatedRuntime: not the in-process Runtime, and holds no index itself."""


def test_forgetting_with_a_remote_session_deletes_the_indexes_on_disk(
    isolated_data_dir: Path,
) -> None:
    corpus = HistoryCorpus(isolated_data_dir, "49152-some-vocabulary")
    corpus.add(list(range(100, 130)))
    assert corpus.save() and corpus.path.exists()
    session: EngineSession = _ChildSession()  # type: ignore[assignment]
    forget_history(session)
    assert not corpus.path.exists()
