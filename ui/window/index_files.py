"""The past-chats index files, deleted from the UI thread before a commit that deletes chat
text (a chat, an edited-away exchange): a crash between the commit and the index's rebuild
would otherwise leave them holding that text, trusted at the next start. The engine thread then
rebuilds the index from what the store keeps (ui/workers/engine.py, forget_history)."""

from __future__ import annotations

import contextlib

from app.engine.corpus_files import forget_every_vocabulary
from app.paths import DataFolderError, data_dir

# The UI thread's wait for the past-chats index's lock, which the engine thread may hold for a
# second or two while it reads or rewrites an index; past it the files are deleted unlocked.
UI_LOCK_WAIT_S = 0.2


def forget_index_files() -> None:
    with contextlib.suppress(DataFolderError):  # then the store cannot delete either
        forget_every_vocabulary(data_dir(), wait=UI_LOCK_WAIT_S)
