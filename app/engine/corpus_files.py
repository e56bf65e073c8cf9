"""Where the past-chats index files live in a data folder (one per target vocabulary, named by
a hash of its fingerprint), how they all go at once when chats are deleted, leaving a stamp
that names the deletion, and how a killed rewrite's leftovers go. The index itself is
app/engine/history_corpus.py."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Protocol

from app.durable import replace_atomically
from app.engine.folder_lock import LOCK_NAME, folder_lock
from app.leftovers import process_alive
from app.own_files import read_own_file
from app.paths import make_private_dir

log = logging.getLogger(__name__)

FOLDER_NAME = "suffix-index"
# Names the last deletion of chats: kept when the index files go (as the lock file is).
DELETIONS_NAME = ".deletions"
_KEPT = (LOCK_NAME, DELETIONS_NAME)


class Vocabulary(Protocol):
    """What a fingerprint reads from a loaded model (LlamaModel has it)."""

    n_vocab: int

    def token_text(self, token: int) -> str: ...


def vocabulary_fingerprint(vocabulary: Vocabulary) -> str:
    """Names a tokenizer: its size and a hash of every token's text, in id order. Two models
    with the same fingerprint give the same ids for the same text."""
    digest = hashlib.blake2b(digest_size=12)
    for token in range(vocabulary.n_vocab):
        digest.update(vocabulary.token_text(token).encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return f"{vocabulary.n_vocab}-{digest.hexdigest()}"


def corpus_path(data_dir: Path, fingerprint: str) -> Path:
    """The corpus file for a vocabulary: always inside `data_dir`, whatever the fingerprint
    says (it is hashed into the name)."""
    name = hashlib.blake2b(fingerprint.encode("utf-8"), digest_size=16).hexdigest()
    return data_dir / FOLDER_NAME / f"{name}.bin"


def forget_every_vocabulary(data_dir: Path, *, wait: float = 10.0) -> None:
    """Delete every vocabulary's corpus under `data_dir`, with journals and the temporary files
    of rewrites a killed process left: chats were deleted, and each file may hold them. A
    target's corpus is rebuilt from the remaining history when it is next loaded.

    wait: how long to wait for the folder's lock before deleting unlocked (a deletion is
    atomic; a file a writer puts back meanwhile bears the stamp before it, and no reader takes
    it in). The
    UI thread waits little: an index being read or rewritten holds the lock for a second or two.

    The deletion leaves a new stamp (`deletion_stamp`) even where there was no index yet: another
    window reading the history meanwhile, for a rebuild, may have read the deleted chats, and
    must not write what it read."""
    folder = data_dir / FOLDER_NAME
    try:
        make_private_dir(folder)
    except OSError as exc:
        log.warning("could not open the chat-history draft indexes in %s (%s)", folder, exc)
        return
    with folder_lock(folder, wait=wait):
        try:
            _stamp_deletion(folder)
        except OSError as exc:
            log.warning("could not record the deletion of chats in %s (%s)", folder, exc)
        try:
            files = [path for path in folder.iterdir() if path.name not in _KEPT]
        except OSError as exc:
            log.warning("could not list the chat-history draft indexes in %s (%s)", folder, exc)
            return
        for path in files:
            try:
                path.unlink()
            except OSError as exc:
                log.warning("could not delete the chat-history draft index %s (%s)", path, exc)


def deletion_stamp(folder: Path) -> bytes:
    """What names the last deletion of chats in the index folder `folder` (b"" before the
    first). An index written from chats read under an older stamp may hold deleted ones.
    OSError when it cannot be read."""
    try:
        return read_own_file(folder / DELETIONS_NAME)
    except FileNotFoundError:
        return b""


def _stamp_deletion(folder: Path) -> None:
    # Random rather than counted: two deletions that missed each other's lock still each leave
    # a stamp no reader saw before them. Renamed into place, so a reader sees one whole stamp.
    # Synced, and its rename too: a stamp a power cut lost, or left empty, would let an index
    # read before the deletion pass for one read after it.
    stamp = os.urandom(16).hex().encode("ascii")

    def write(tmp: Path) -> None:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(stamp)

    # A killed deletion's copy goes with the next deletion (every name not kept goes).
    temporary = folder / f"{DELETIONS_NAME}.tmp-{os.getpid()}"
    replace_atomically(folder / DELETIONS_NAME, write, temporary=temporary)


def remove_orphaned_rewrites(path: Path) -> None:
    """Delete the temporary copies of the index file at `path` that killed processes left."""
    # A process killed while rewriting the file leaves its temporary copy (named by that
    # process's id, see write_index_file): chat text outside the bound and out of clear()'s
    # reach. A live writer's copy is left to it.
    for leftover in path.parent.glob(f"{path.name}.tmp-*"):
        pid = leftover.name.rpartition("-")[2]
        if pid.isdigit() and process_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            leftover.unlink()


def discard_index_file(path: Path) -> None:
    """Remove an index file, or a folder in its place (in the app's own index folder, under a
    name no one else picks: nothing of the user's)."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def make_index_folder(index_path: Path) -> bool:
    """The folder of the index file at `index_path`, made private to the user; False (logged:
    the index in memory still serves) when the disk refuses it."""
    try:
        make_private_dir(index_path.parent)
    except OSError as exc:
        log.warning("could not save the chat-history draft index %s (%s)", index_path, exc)
        return False
    return True
