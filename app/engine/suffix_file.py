"""The chat-history index file: documents and the automaton's columns, checksummed, written by
temporary file and rename.

Layout (little-endian): magic, format version, the vocabulary fingerprint, the deletion stamp
the documents were read under (app/engine/corpus_files.py), 16 random bytes, the documents
(their lengths, then their token ids), the index's columns (each: item count, then items), and
a BLAKE2b digest of everything before it. The random bytes make the digest name one write of
the file: two writes of the same documents differ, so a journal that continues one
(app/engine/suffix_journal.py) is never taken for the other's. Any mismatch (short file, bad
digest, another format or vocabulary, columns that do not make an automaton) is a
IndexFileError, never a crash.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.durable import replace_atomically
from app.engine.suffix_columns import index_from_columns
from app.engine.suffix_index import COLUMNS, SuffixIndex
from app.own_files import open_own_file, read_own_file

MAGIC = b"SPECCHAT-SUFFIX\0"
FORMAT_VERSION = 3
DIGEST_BYTES = 32
_WRITE_ID_BYTES = 16
_COLUMN_TYPES = {"degree": "B"}  # every other column holds 32-bit ints


class IndexFileError(Exception):
    """The file cannot be used; str() says why in a few words."""


@dataclass(frozen=True, slots=True)
class IndexFile:
    documents: list[array[int]]
    index: SuffixIndex
    digest: bytes  # names this write of the file
    deletions: bytes  # the deletion stamp its documents were read under


def write_index_file(
    path: Path,
    fingerprint: str,
    documents: Sequence[array[int]],
    index: SuffixIndex,
    *,
    deletions: bytes,
) -> bytes:
    """Replace `path` atomically (a crash leaves the old file or the new one, never half);
    returns the new file's digest, which names it. deletions: the folder's deletion stamp
    when the documents were read."""
    named = b""

    def write(tmp: Path) -> None:
        nonlocal named
        digest = hashlib.blake2b(digest_size=DIGEST_BYTES)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            os.chmod(tmp, 0o600)  # O_CREAT's mode went through the umask

            def put(data: bytes) -> None:
                digest.update(data)
                out.write(data)

            name = fingerprint.encode("utf-8")
            put(MAGIC + struct.pack("<II", FORMAT_VERSION, len(name)) + name)
            put(struct.pack("<I", len(deletions)) + deletions + os.urandom(_WRITE_ID_BYTES))
            put(struct.pack("<QQQ", len(documents), index.tokens, index.documents))
            put(little_endian(array("I", [len(d) for d in documents])))
            for document in documents:
                put(little_endian(document))
            for column_name, column in index.columns().items():
                if column.typecode != _COLUMN_TYPES.get(column_name, "i"):
                    raise TypeError(f"column {column_name} is not of the file's type")
                put(struct.pack("<Q", len(column)))
                put(little_endian(column))
            named = digest.digest()
            out.write(named)

    # Named by this process, so remove_orphaned_rewrites (app/engine/corpus_files.py) can tell
    # a killed rewrite's copy from a live one's.
    temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    replace_atomically(path, write, temporary=temporary)
    return named


def stored_digest(path: Path) -> bytes | None:
    """The digest that names the file at `path`, read from its end without checking the rest;
    None when there is no such file. Tells a writer whether another process replaced it."""
    try:
        with open_own_file(path) as f:
            size = f.seek(0, os.SEEK_END)
            if size < len(MAGIC) + DIGEST_BYTES:
                return b""
            f.seek(size - DIGEST_BYTES)
            return f.read(DIGEST_BYTES)
    except FileNotFoundError:
        return None


def read_index_file(path: Path, fingerprint: str) -> IndexFile:
    """The file stored at `path` for this fingerprint."""
    data = read_own_file(path)
    if len(data) < len(MAGIC) + DIGEST_BYTES or not data.startswith(MAGIC):
        raise IndexFileError("not a chat-history index file")
    body, stored_digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    if hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() != stored_digest:
        raise IndexFileError("truncated or damaged (checksum mismatch)")
    try:
        return _parse(_Reader(memoryview(body), len(MAGIC)), fingerprint, stored_digest)
    except (ValueError, OverflowError, MemoryError) as exc:
        # A digest anyone can recompute proves no intent: what it covers is checked as well.
        raise IndexFileError(f"malformed ({exc})") from None


def _parse(reader: _Reader, fingerprint: str, digest: bytes) -> IndexFile:
    version, name_length = reader.unpack("<II")
    if version != FORMAT_VERSION:
        raise IndexFileError(f"format {version}, this version reads {FORMAT_VERSION}")
    if reader.take(name_length) != fingerprint.encode("utf-8"):
        raise IndexFileError("written for another vocabulary")
    deletions = reader.take(reader.unpack("<I")[0])
    reader.take(_WRITE_ID_BYTES)
    n_documents, n_tokens, n_indexed_documents = reader.unpack("<QQQ")
    lengths = reader.column("I", n_documents)
    documents = [reader.column("i", length) for length in lengths]
    columns = {
        name: reader.column(_COLUMN_TYPES.get(name, "i"), reader.unpack("<Q")[0])
        for name in COLUMNS
    }
    if not reader.at_end():
        raise IndexFileError("unexpected data after the index")
    if sum(lengths) != n_tokens:
        raise IndexFileError("documents and index disagree on the token count")
    index = index_from_columns(columns, tokens=n_tokens, documents=n_indexed_documents)
    return IndexFile(documents, index, digest, deletions)


class _Reader:
    def __init__(self, data: memoryview, offset: int) -> None:
        self._data = data
        self._offset = offset

    def take(self, n: int) -> bytes:
        end = self._offset + n
        if n < 0 or end > len(self._data):
            raise IndexFileError("shorter than its header says")
        chunk = bytes(self._data[self._offset : end])
        self._offset = end
        return chunk

    def unpack(self, layout: str) -> tuple[int, ...]:
        return struct.unpack(layout, self.take(struct.calcsize(layout)))

    def column(self, typecode: str, n: int) -> array[int]:
        column = array(typecode)
        column.frombytes(self.take(n * column.itemsize))
        if sys.byteorder != "little":
            column.byteswap()
        return column

    def at_end(self) -> bool:
        return self._offset == len(self._data)


def little_endian(column: array[int]) -> bytes:
    """The column's bytes in the files' byte order."""
    if sys.byteorder == "little":
        return column.tobytes()
    swapped = array(column.typecode, column)
    swapped.byteswap()
    return swapped.tobytes()
