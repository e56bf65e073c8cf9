"""Documents added since the chat-history index file was written, appended beside it.

Rewriting the whole file after every reply would write megabytes a reply; the journal appends
the reply's tokens alone (a kilobyte) and the file is rewritten only now and then. The journal
names the file it continues (by the file's digest): one left over from an older file, as a crash
between writing a new file and deleting the journal leaves, is ignored, since the new file
already holds its documents. Each record carries its own checksum, so a record torn by a crash
ends the journal there and the records before it still count. Damage anywhere else (a bad
record with more after it, a header that is not a journal's) loses records that cannot be
told apart from the rest: the reader says so, and the corpus is rebuilt from the chat history.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from app.engine.suffix_file import DIGEST_BYTES, little_endian

MAGIC = b"SPECCHAT-SUFLOG\0"
_RECORD_DIGEST_BYTES = 16


# "torn": its last record was cut by a crash, the ones before it are whole; "damaged": records
# after the damage, or all of them, could not be read.
JournalState = Literal["whole", "torn", "damaged"]


def journal_path(index_path: Path) -> Path:
    return index_path.with_suffix(".log")


def append_journal(index_path: Path, continues: bytes, documents: Sequence[array[int]]) -> None:
    """Append documents to the journal of the index file whose digest is `continues`,
    starting the journal if there is none for it."""
    path = journal_path(index_path)
    fresh = not path.exists() or _header(path) != MAGIC + continues
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if fresh else os.O_APPEND), 0o600)
    os.chmod(path, 0o600)
    with os.fdopen(fd, "wb") as out:
        if fresh:
            out.write(MAGIC + continues)
        for document in documents:
            body = struct.pack("<I", len(document)) + little_endian(document)
            digest = hashlib.blake2b(body, digest_size=_RECORD_DIGEST_BYTES).digest()
            out.write(body + digest)
        out.flush()
        os.fsync(out.fileno())


def read_journal(
    index_path: Path, continues: bytes | None
) -> tuple[list[array[int]], JournalState]:
    """The journal's readable documents for the index file with digest `continues` (None:
    whichever file it names), and its state."""
    path = journal_path(index_path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], "whole"
    header_bytes = len(MAGIC) + DIGEST_BYTES
    if len(data) < header_bytes and MAGIC.startswith(data[: len(MAGIC)]):
        return [], "whole"  # its header being written (or cut by a crash): no record yet
    if not data.startswith(MAGIC):
        return [], "damaged"
    if continues is not None and data[len(MAGIC) : header_bytes] != continues:
        return [], "whole"  # it continued another file, whose successor holds its documents
    header = data[:header_bytes]
    documents: list[array[int]] = []
    at = len(header)
    while at < len(data):
        if at + 4 > len(data):
            return documents, "torn"
        (n,) = struct.unpack_from("<I", data, at)
        end = at + 4 + 4 * n + _RECORD_DIGEST_BYTES
        if end > len(data):
            return documents, "torn"
        body = data[at : end - _RECORD_DIGEST_BYTES]
        if (
            hashlib.blake2b(body, digest_size=_RECORD_DIGEST_BYTES).digest()
            != data[end - _RECORD_DIGEST_BYTES : end]
        ):
            return documents, "torn" if end == len(data) else "damaged"
        document = array("i")
        document.frombytes(body[4:])
        if sys.byteorder != "little":
            document.byteswap()
        documents.append(document)
        at = end
    return documents, "whole"


def _header(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(MAGIC) + DIGEST_BYTES)
