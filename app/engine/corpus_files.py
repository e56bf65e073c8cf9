"""Where the past-chats index files live in a data folder (one per target vocabulary, named by
a hash of its fingerprint) and how they all go at once when chats are deleted. The index itself
is app/engine/history_corpus.py."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Protocol

from app.engine.folder_lock import LOCK_NAME, folder_lock

log = logging.getLogger(__name__)

FOLDER_NAME = "suffix-index"


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
    atomic; what a writer puts back meanwhile, the rebuild after the deletion replaces). The
    UI thread waits little: an index being read or rewritten holds the lock for a second or two."""
    folder = data_dir / FOLDER_NAME
    with folder_lock(folder, wait=wait):
        try:
            files = [path for path in folder.iterdir() if path.name != LOCK_NAME]
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("could not list the chat-history draft indexes in %s (%s)", folder, exc)
            return
        for path in files:
            try:
                path.unlink()
            except OSError as exc:
                log.warning("could not delete the chat-history draft index %s (%s)", path, exc)
