"""Documents added since the chat-history index file was written, appended beside it.

Rewriting the whole file after every reply would write megabytes a reply; the journal appends
the reply's tokens alone (a kilobyte) and the file is rewritten only now and then. The journal
names the file it continues (by the file's digest): one left over from an older file, as a crash
between writing a new file and deleting the journal leaves, is ignored, since the new file
already holds its documents. Each record carries its own checksum, so a record torn by a crash
(or a full disk) ends the journal there and the records before it still count; the next append
cuts it off before writing, so records written after a tear are not lost with it. Damage
anywhere else (a bad record with more after it, a header that is not a journal's) loses records
that cannot be told apart from the rest: the reader says so, and the corpus is rebuilt from the
chat history.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from app.durable import fsync_folder
from app.engine.suffix_file import DIGEST_BYTES, little_endian
from app.own_files import read_own_file

MAGIC = b"SPECCHAT-SUFLOG\0"
_HEADER_BYTES = len(MAGIC) + DIGEST_BYTES
_RECORD_DIGEST_BYTES = 16


# "torn": its last record was cut by a crash, the ones before it are whole; "damaged": records
# after the damage, or all of them, could not be read.
JournalState = Literal["whole", "torn", "damaged"]


def journal_path(index_path: Path) -> Path:
    return index_path.with_suffix(".log")


def append_journal(
    index_path: Path,
    continues: bytes,
    documents: Sequence[array[int]],
    *,
    read: bytes | None = None,
) -> None:
    """Append documents to the journal of the index file whose digest is `continues`,
    starting the journal if there is none for it.

    The caller holds the folder's lock (app/engine/folder_lock.py), so no other writer is
    appending meanwhile: a last record cut short is a dead writer's (killed, or refused by a
    full disk) and is cut off first, since a record written after it would turn the tear into
    damage, and the reader would drop every record, these ones included. An append that fails
    is cut back to where it began, so the journal stays whole for the next one.

    read: the journal as the caller read it (`journal_bytes`) under this same hold of the
    lock, so that a save reads it once. Only a deletion of chats that went on unlocked
    (app/engine/corpus_files.py) changes it under a held lock, and it deletes the journal: one
    whose length is not that of `read` is read afresh."""
    path = journal_path(index_path)
    records = b"".join(_record(document) for document in documents)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.chmod(path, 0o600)
        data = read if read is not None and os.fstat(fd).st_size == len(read) else _read_all(fd)
        if data[:_HEADER_BYTES] == MAGIC + continues:
            _documents, state, whole = _scan(data, decode=False)
            # Damage inside it is left for the reader to report: cutting there would lose the
            # records after it without a word.
            start = whole if state == "torn" else len(data)
        else:  # none yet, or one left from an older file: start it afresh
            start = 0
            records = MAGIC + continues + records
        try:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            view = memoryview(records)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):  # else the next append cuts it off
                os.ftruncate(fd, start)
            raise
        if start == 0:
            # A journal just started may be a name just made: until the folder is on the disk
            # a power cut can take the file, records and all. An append to one already
            # started skips this, its name having been synced when it began.
            fsync_folder(path.parent)
    finally:
        os.close(fd)


def read_journal(
    index_path: Path, continues: bytes | None
) -> tuple[list[array[int]], JournalState]:
    """The journal's readable documents for the index file with digest `continues` (None:
    whichever file it names), and its state."""
    return decode_journal(journal_bytes(index_path), continues)


def journal_bytes(index_path: Path) -> bytes:
    """The journal of the index file at `index_path` as it is now; b"" when there is none."""
    try:
        return read_own_file(journal_path(index_path))
    except FileNotFoundError:
        return b""


def decode_journal(data: bytes, continues: bytes | None) -> tuple[list[array[int]], JournalState]:
    """`read_journal` of a journal already read (`journal_bytes`)."""
    if len(data) < _HEADER_BYTES and MAGIC.startswith(data[: len(MAGIC)]):
        return [], "whole"  # its header being written (or cut by a crash): no record yet
    if not data.startswith(MAGIC):
        return [], "damaged"
    if continues is not None and data[len(MAGIC) : _HEADER_BYTES] != continues:
        return [], "whole"  # it continued another file, whose successor holds its documents
    documents, state, _whole = _scan(data, decode=True)
    return documents, state


def _scan(data: bytes, *, decode: bool) -> tuple[list[array[int]], JournalState, int]:
    """The records after the header (decoded when asked), the journal's state, and where its
    last whole record ends."""
    documents: list[array[int]] = []
    at = _HEADER_BYTES
    while at < len(data):
        if at + 4 > len(data):
            return documents, "torn", at
        (n,) = struct.unpack_from("<I", data, at)
        end = at + 4 + 4 * n + _RECORD_DIGEST_BYTES
        if end > len(data):
            return documents, "torn", at
        body = data[at : end - _RECORD_DIGEST_BYTES]
        if (
            hashlib.blake2b(body, digest_size=_RECORD_DIGEST_BYTES).digest()
            != data[end - _RECORD_DIGEST_BYTES : end]
        ):
            return documents, "torn" if end == len(data) else "damaged", at
        if decode:
            document = array("i")
            document.frombytes(body[4:])
            if sys.byteorder != "little":
                document.byteswap()
            documents.append(document)
        at = end
    return documents, "whole", at


def _record(document: array[int]) -> bytes:
    body = struct.pack("<I", len(document)) + little_endian(document)
    return body + hashlib.blake2b(body, digest_size=_RECORD_DIGEST_BYTES).digest()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
