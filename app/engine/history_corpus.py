"""Past chats as one suffix index, kept beside the chat history in the data folder.

What the user and the model wrote before is the cheapest draft there is: people re-ask, paste the
same code, ask for the last reply again with a change. The corpus holds past prompts and replies
as token ids of one target vocabulary (one file per vocabulary fingerprint, since ids mean nothing
across tokenizers) and the automaton built from them, so opening it costs a file read, not a
rebuild.

Policy: at most `max_tokens` tokens; a document already held is not stored twice; past the bound
the oldest documents go first, down to three quarters of it, so the rebuild that dropping costs
(the automaton cannot forget: 1-4 s for 225k tokens, once per ~300 replies of 250 tokens) comes
rarely; `add` belongs off the UI thread.

On disk: `save` appends the replies added since to a journal (app/engine/suffix_journal.py), a
kilobyte a reply; the file itself is written whole, to a temporary file renamed over the old one
(a killed process leaves the old or the new file, never half of one), when documents were
dropped or the journal has grown to a quarter of the corpus. Both are private to the user (0600
in a 0700 folder). A file that is missing, truncated, corrupt or of another format is discarded
with a one-line log and the corpus starts empty with `needs_rebuild` set: the caller tokenizes
the stored chats (`stored_documents`, app/engine/past_chats.py) and calls `rebuild`. It is a
cache of the chat history: `clear` deletes it when the history is wiped.

Two processes on one data folder (two windows) share the file, and deleting chats stamps the
folder so that no process writes back a chat it read before the deletion:
app/engine/corpus_sync.py says how.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

from app.engine.corpus_files import (
    corpus_path,
    deletion_stamp,
    discard_index_file,
    make_index_folder,
    remove_orphaned_rewrites,
)
from app.engine.corpus_sync import (
    document_digest,
    journal_news,
    log_busy,
    log_journal_fault,
    saved_meanwhile,
)
from app.engine.folder_lock import FolderBusyError, folder_lock
from app.engine.past_chats import newest_within
from app.engine.suffix_file import (
    IndexFileError,
    read_index_file,
    stored_digest,
    write_index_file,
)
from app.engine.suffix_index import SuffixIndex
from app.engine.suffix_journal import append_journal, journal_path, read_journal

log = logging.getLogger(__name__)

# 300k tokens: about 1,200 replies of 250 tokens, 26 MB of index in memory, 17 MB on disk.
DEFAULT_MAX_TOKENS = 300_000
# What a corpus past its bound is cut down to, as a share of the bound.
_KEEP_AFTER_DROP = 0.75
# Shorter documents cannot hold a match worth drafting from.
MIN_DOCUMENT_TOKENS = 4
# Saving appends to the journal until it holds this share of the corpus (or at least this many
# tokens); then the file is written afresh and the journal starts again.
_JOURNAL_SHARE = 0.25
_JOURNAL_MIN_TOKENS = 20_000


class HistoryCorpus:
    """The past-chats index of one vocabulary. Not thread-safe: add and read from one thread."""

    def __init__(
        self,
        data_dir: Path,
        fingerprint: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        persist: bool = True,
    ) -> None:
        """persist=False: held in memory alone for the life of the process (`specchat serve`,
        the bench): no file is read or written (clear() and rebuild() still look in
        `data_dir`, which such callers keep apart); nothing is kept for a save."""
        if max_tokens < MIN_DOCUMENT_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_DOCUMENT_TOKENS}")
        self.path = corpus_path(data_dir, fingerprint)
        self.fingerprint = fingerprint
        self.max_tokens = max_tokens
        self.index = SuffixIndex()
        self._documents: list[array[int]] = []
        self._digests: set[bytes] = set()
        self.tokens = 0
        # True when no file could be read: the chats on record are not in the index yet.
        self.needs_rebuild = False
        self.dirty = False  # changes not saved yet
        self._file_digest: bytes | None = None  # names the file on disk, when there is one
        self._unsaved: list[array[int]] = []  # added since the last save, for the journal
        self._journal_tokens = 0
        # Records of the file's journal this corpus has taken in or written: those after them
        # are replies another process added since. Counted, not named by content: a reply
        # identical to a document dropped here past the bound is a new one all the same.
        self._journal_seen = 0
        self._rewrite = False  # the next save writes the file afresh (documents were dropped)
        # The folder's deletion stamp when the documents held were read (None: unknown). Held
        # documents read under an older one may include deleted chats: they are never written.
        self._deletions: bytes | None = None
        self._persist = persist
        if persist:
            self._load()

    @property
    def documents(self) -> int:
        return len(self._documents)

    def add(self, tokens: Sequence[int]) -> bool:
        """Index one prompt or reply; False when it was too short or is already held."""
        document = array("i", tokens)[-self._kept_tokens() :]
        if not self._take(document):
            return False
        if self._persist:  # else it would keep a copy of every reply for a save never made
            self._unsaved.append(document)
            self.dirty = True
        return True

    def rebuild(self, documents: Iterable[Sequence[int]], *, newest_first: bool = False) -> None:
        """Replace the corpus by these documents (oldest first unless `newest_first`), index
        them once and save. Newest first, they are read only until the bound is passed, since
        older ones would be dropped at once: a history many times the bound (1,500 long chats)
        was tokenized whole after every deletion, 10 s before the next reply could start."""
        # Replies another window saves while the history is read (seconds, lazily) are not
        # in what it yields: they are taken in at the end, under the lock. A chat deleted in
        # another window meanwhile may be in what it yields: the deletion's stamp tells, and
        # then nothing read is written or kept.
        deletions = self._stamp_now() if self._persist else None
        try:
            file_before = stored_digest(self.path)
            journaled_before = len(read_journal(self.path, file_before)[0]) if file_before else 0
        except OSError as exc:  # a folder in the file's place: the save below says so
            log.warning("could not read the chat-history draft index %s (%s)", self.path, exc)
            discard_index_file(self.path)
            file_before, journaled_before = None, 0
        self._reset()
        # Read now, after the file's state: what changes meanwhile is known.
        ordered = documents if newest_first else reversed(list(documents))
        kept, history = newest_within(
            ordered, self.max_tokens, self._kept_tokens(), MIN_DOCUMENT_TOKENS
        )
        for document in kept:
            self._admit(document)
        if self.tokens > self.max_tokens:
            self._drop_oldest()
        self._reindex()
        self.needs_rebuild = False
        self._deletions = deletions
        if not self._persist:
            return
        self.dirty = True  # until it is on disk
        if deletions is None or not make_index_folder(self.path):
            return  # logged; the index in memory still serves
        try:
            with folder_lock(self.path.parent, give_up=True):
                if deletion_stamp(self.path.parent) != deletions:
                    self._reset()
                    self.needs_rebuild = True
                    self.dirty = False
                    log.info("chats were deleted while the past-chats index was rebuilt")
                    return
                for document in saved_meanwhile(
                    self.path,
                    self.fingerprint,
                    file_before=file_before,
                    journaled_before=journaled_before,
                    history=history,
                    deletions=deletions,
                ):
                    self._take(document)
                # Built from the history itself: it replaces whatever another process wrote.
                self._save(over_others=True)
        except FolderBusyError as exc:
            log_busy(self.path, exc)
        except OSError as exc:
            log.warning("could not save the chat-history draft index %s (%s)", self.path, exc)

    def deleted_elsewhere(self) -> bool:
        """Whether another process on this data folder deleted chats since the documents held
        were read: they may hold the deleted ones, which must never draft again. One read of a
        small file, for a check before each reply."""
        if not self._persist or self._deletions is None:
            return False
        now = self._stamp_now()
        return now is not None and now != self._deletions

    def save(self) -> bool:
        """Put what changed on disk: the documents added since, appended to the journal, or the
        whole file written afresh when documents were dropped or the journal has grown. False
        (logged; the index in memory still serves) when the disk refused it.

        Another process on the same data folder may have written the file since: then this
        corpus becomes what it wrote plus the documents added here, so neither loses the
        other's replies. One that deleted chats (a new deletion stamp) leaves this corpus the
        file written since the deletion, or `needs_rebuild` set when there is none: what was
        held here may include the deleted chats, and is neither written nor kept.

        One that holds the folder's lock past the wait (a stopped process) is not written
        over: nothing is written, and what changed stays for the next save (False)."""
        if not self._persist:
            return True
        if not make_index_folder(self.path):
            return False
        try:
            with folder_lock(self.path.parent, give_up=True):
                return self._save(over_others=False)
        except FolderBusyError as exc:
            log_busy(self.path, exc)
            return False

    def _save(self, *, over_others: bool) -> bool:
        """Called under the folder's lock."""
        try:
            deletions = deletion_stamp(self.path.parent)  # a rebuild checked it already
            journal: bytes | None = None  # as read under this hold of the lock
            if not over_others and (
                deletions != self._deletions or stored_digest(self.path) != self._file_digest
            ):
                self._deletions = deletions
                self._adopt_disk()
            elif not over_others:
                journal = self._take_journal_news()
            unsaved = sum(len(d) for d in self._unsaved)
            journal_limit = max(_JOURNAL_MIN_TOKENS, int(_JOURNAL_SHARE * self.tokens))
            if (
                self._file_digest is None
                or self._rewrite
                or self._journal_tokens + unsaved > journal_limit
            ):
                digest = write_index_file(
                    self.path, self.fingerprint, self._documents, self.index, deletions=deletions
                )
                self._file_digest, self._rewrite = digest, False
                self._journal_tokens = self._journal_seen = 0
                # Only now: a crash before leaves the new file and a journal of the old one,
                # which is ignored.
                journal_path(self.path).unlink(missing_ok=True)
            elif self._unsaved:
                append_journal(self.path, self._file_digest, self._unsaved, read=journal)
                self._journal_tokens += unsaved
                self._journal_seen += len(self._unsaved)
        except OSError as exc:
            log.warning("could not save the chat-history draft index %s (%s)", self.path, exc)
            return False
        self._unsaved = []
        self.dirty = False
        return True

    def clear(self) -> None:
        """Forget every document and delete the file (the chat history was wiped)."""
        self._reset()
        self.needs_rebuild = False
        self.dirty = False
        try:
            with folder_lock(self.path.parent):
                self.path.unlink(missing_ok=True)
                journal_path(self.path).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not delete the chat-history draft index %s (%s)", self.path, exc)

    # -- internals ----------------------------------------------------------------------------

    def _load(self) -> None:
        with folder_lock(self.path.parent):  # no folder yet: nothing to read, no lock needed
            self._deletions = self._stamp_now()
            if self._deletions is None:
                self.needs_rebuild = True
                return
            self._read_disk()

    def _stamp_now(self) -> bytes | None:
        try:
            return deletion_stamp(self.path.parent)
        except OSError as exc:
            log.warning("could not read %s's deletion stamp (%s)", self.path.parent, exc)
            return None

    def _read_disk(self) -> None:
        remove_orphaned_rewrites(self.path)
        if not self.path.exists():
            self.needs_rebuild = True
            return
        try:
            stored = read_index_file(self.path, self.fingerprint)
            if stored.deletions != self._deletions:
                # A writer that read its chats before a deletion renamed its file in after it
                # (the deletion went on without the lock): it may hold a deleted chat.
                raise IndexFileError("written from chats read before some were deleted")
            journal, journal_state = read_journal(self.path, stored.digest)
        except (OSError, IndexFileError) as exc:
            log.warning("discarding the chat-history draft index %s: %s", self.path, exc)
            for path in (self.path, journal_path(self.path)):
                discard_index_file(path)  # then the next save replaces them
            self.needs_rebuild = True
            return
        self._documents = stored.documents
        self._digests = {document_digest(d) for d in stored.documents}
        self.tokens = sum(len(d) for d in stored.documents)
        self.index = stored.index
        self._file_digest = stored.digest
        if self.tokens > self.max_tokens:  # saved under a larger bound
            self._drop_oldest()
            self._reindex()
            self._rewrite = True
        for document in journal:
            if self._take(document):
                self._journal_tokens += len(document)
        self._journal_seen = len(journal)
        self.dirty = self._rewrite  # dropping documents changed what the file should hold
        if journal_state != "whole":
            log_journal_fault(journal_path(self.path), journal_state, len(journal))
            self._rewrite = self.dirty = True
            if journal_state == "damaged":  # replies past it are in the chat history
                self.needs_rebuild = True

    def _adopt_disk(self) -> None:
        mine = self._unsaved
        self._reset()
        self._read_disk()  # a missing or unreadable file sets needs_rebuild
        for document in mine:
            if self._take(document):
                self._unsaved.append(document)

    def _take_journal_news(self) -> bytes | None:
        # Replies another process appended to this file's journal since this corpus last read
        # or wrote it: a rewrite deletes the journal, so they must be in the new file.
        if self._file_digest is None:
            return None
        news, self._journal_seen, journal = journal_news(
            self.path, self._file_digest, self._journal_seen
        )
        for document in news:
            self._take(document)
            self._journal_tokens += len(document)
        return journal

    def _admit(self, document: array[int]) -> bool:
        """Add a document to the corpus (not yet to the index) unless it is too short to
        draft from or already stored: duplicates are kept once."""
        digest = document_digest(document)
        if len(document) < MIN_DOCUMENT_TOKENS or digest in self._digests:
            return False
        self._documents.append(document)
        self._digests.add(digest)
        self.tokens += len(document)
        return True

    def _take(self, document: array[int]) -> bool:
        if not self._admit(document):
            return False
        if self.tokens > self.max_tokens:
            self._drop_oldest()
            self._reindex()
            self._rewrite = True
        else:
            self.index.add_document(document)
        return True

    def _kept_tokens(self) -> int:
        # A document longer than what a full corpus keeps keeps its end, the freshest part.
        return int(self.max_tokens * _KEEP_AFTER_DROP)

    def _drop_oldest(self) -> None:
        keep = self._kept_tokens()
        dropped = 0
        while self.tokens > keep:
            document = self._documents[dropped]
            self._digests.discard(document_digest(document))
            self.tokens -= len(document)
            dropped += 1
        del self._documents[:dropped]
        # The next save rewrites the whole file: a dropped document is not one to keep for it.
        self._unsaved = [d for d in self._unsaved if document_digest(d) in self._digests]

    def _reindex(self) -> None:
        index = SuffixIndex()
        for document in self._documents:
            index.add_document(document)
        self.index = index

    def _reset(self) -> None:
        self._documents = []
        self._digests = set()
        self.tokens = 0
        self.index = SuffixIndex()
        self._file_digest = None
        self._unsaved = []
        self._journal_tokens = 0
        self._journal_seen = 0
        self._rewrite = False
