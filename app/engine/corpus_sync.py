"""What another process on the same data folder saved to a past-chats index file since this
one last read or wrote it, for app/engine/history_corpus.py to take in under the folder's lock.
A document is named by its digest (`document_digest`): the corpus holds each document once.

Two processes on one data folder (two windows) share the file: each reads, writes and deletes
it under the folder's lock (app/engine/folder_lock.py), writes only over the file it last read
or wrote, after taking in what the other wrote since, so neither loses the other's replies.
What the other appended to the journal is told by its place there, past the records this one
has seen, not by its content: a reply identical to a document dropped here past the bound is
a new one and is kept.

Deleting chats deletes every index file and leaves a new deletion stamp in the folder
(app/engine/corpus_files.py); a file records the stamp its documents were read under. Documents
read under an older stamp may include a deleted chat, so they are never written or taken in: a
save finding a new stamp takes the file written since the deletion (plus the replies added
here since the last save) or, with none, sets `needs_rebuild`; a rebuild whose history was read
across a deletion keeps none of it and sets `needs_rebuild`; a file bearing an older stamp (its
writer checked before a deletion that went on without the lock) is discarded. The window that
deletes chats stamps before they leave the history and again after (ui/window/main_window.py,
`delete_conversation`), so a history read between the two is caught too.

A rebuild reads the history unlocked (seconds) and takes in, under the lock, what the other
wrote meanwhile. A writer never writes unlocked: when the other holds the lock past its wait (a
stopped process) the save writes nothing and returns False, and what it held stays for the next
save (the chat history has the replies all along).
"""

from __future__ import annotations

import hashlib
import logging
from array import array
from pathlib import Path

from app.engine.folder_lock import FolderBusyError
from app.engine.suffix_file import IndexFileError, read_index_file, stored_digest
from app.engine.suffix_journal import JournalState, decode_journal, journal_bytes, read_journal

log = logging.getLogger(__name__)

__all__ = ["document_digest", "journal_news", "saved_meanwhile"]


def document_digest(document: array[int]) -> bytes:
    return hashlib.blake2b(document.tobytes(), digest_size=16).digest()


def saved_meanwhile(
    path: Path,
    fingerprint: str,
    *,
    file_before: bytes | None,
    journaled_before: int,
    history: set[bytes],
    deletions: bytes,
) -> list[array[int]]:
    """What another process saved while a rebuild read the history: not in what it read.

    file_before, journaled_before: the file's digest and its journal's record count when the
    rebuild began; history: the digests of the documents it read; deletions: the deletion
    stamp it read them under."""
    now = stored_digest(path)
    if now is None:
        return []
    if now == file_before:
        # The journal's records from before are in the history, or were deleted with it; each
        # one after them is a reply added since, even one identical to a document of the
        # history this rebuild dropped past the bound.
        return read_journal(path, now)[0][journaled_before:]
    # Written afresh: the history the other process read (what of it this rebuild dropped past
    # the bound stays out) and its replies since. One read before a deletion may hold a deleted
    # chat: this rebuild's file replaces it, and nothing of it is taken in.
    try:
        stored = read_index_file(path, fingerprint)
    except (OSError, IndexFileError) as exc:
        log.warning("could not read %s written meanwhile (%s)", path, exc)
        return []
    if stored.deletions != deletions:
        return []
    fresh = [d for d in stored.documents if document_digest(d) not in history]
    return fresh + read_journal(path, now)[0]


def journal_news(path: Path, file_digest: bytes, seen: int) -> tuple[list[array[int]], int, bytes]:
    """The records another process appended to the journal of the file named `file_digest`
    past the first `seen`, how many records the journal holds now, and the journal as read
    (for `append_journal` under the same hold of the lock, which then need not read it again)."""
    data = journal_bytes(path)
    journal, _state = decode_journal(data, file_digest)
    return journal[seen:], len(journal), data


def log_busy(path: Path, exc: FolderBusyError) -> None:
    """A save or rebuild that found the folder locked by another window writes nothing."""
    # Written unlocked, a journal record could land where the holder's own is being written,
    # and one of the two would be lost or both damaged. The chat history holds the replies;
    # the index keeps them in memory and writes them with its next save.
    log.warning("the chat-history draft index %s is not saved for now: %s", path, exc)


def log_journal_fault(journal: Path, state: JournalState, kept: int) -> None:
    """One line for a journal read `torn` (its last record cut short: `kept` documents before
    it are kept) or `damaged` (the index is rebuilt from the chat history)."""
    if state == "torn":
        log.warning(
            "the chat-history draft index journal %s ends in a damaged record; "
            "the %d documents before it are kept",
            journal,
            kept,
        )
    else:
        log.warning(
            "the chat-history draft index journal %s is damaged; rebuilding the index "
            "from the chat history",
            journal,
        )
