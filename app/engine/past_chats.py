"""What the past-chats index learns from a reply (Runtime feeds it; app/engine/history_corpus.py
holds it): the exchange as one document, learnt once the reply has finished, and only the part
of it the receiver kept.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.control import GenerationControl
from app.engine.corpus_sync import document_digest
from app.engine.events import Event, FinishEvent
from app.store import ConversationStore
from app.store_errors import StoreError

log = logging.getLogger(__name__)

# Tokens of the prompt's end kept with each reply in the past-chats index: the question and
# the turn markers before the reply, so that the same question asked again matches and drafts
# the old reply from its first token.
REMEMBERED_PROMPT_TOKENS = 256


@dataclass(frozen=True)
class HistoryTokens:
    """How the stored chats become token ids: `text`, a message's text as typed (no control
    tokens); `asked`, the prompt a question makes on its own, the chat template's turn markers
    around it (as text where the template cannot render it)."""

    text: Callable[[str], Sequence[int]]
    asked: Callable[[str], Sequence[int]]


HistorySource = Callable[[HistoryTokens], Iterable[Sequence[int]]]
"""Every stored exchange as token ids, newest first: what a past-chats index is rebuilt from
when its file is missing or damaged, or after chats were deleted."""


def exchange(prompt_ids: Sequence[int], reply_ids: Sequence[int]) -> list[int]:
    """One past-chats document: the reply with the prompt's end before it."""
    return [*prompt_ids[-REMEMBERED_PROMPT_TOKENS:], *reply_ids]


def remembering(
    events: Iterator[Event],
    control: GenerationControl | None,
    remember: Callable[[Sequence[int]], None],
) -> Iterator[Event]:
    """Pass a reply's events on, handing `remember` the reply's tokens once it has finished:
    those the receiver kept (GenerationControl.kept_tokens), never what it dropped."""
    for event in events:
        if isinstance(event, FinishEvent):
            kept = None if control is None else control.kept_tokens
            remember(event.result.token_ids[:kept])
        yield event


def stored_documents(store: ConversationStore, tokens: HistoryTokens) -> Iterator[Sequence[int]]:
    """Every stored reply as the document a reply makes when it is written (`exchange`): the
    question's prompt, its turn markers included, then the reply; newest first, so a rebuild
    reads no further back than the index keeps (HistoryCorpus.rebuild, newest_first).

    Rebuilt as bare text, the documents held no turn markers, so a question asked again found
    no match until its reply's first tokens were out (14 rounds for a 96-token answer where the
    index as written drafts it in 2)."""
    for conversation in store.conversations():  # newest first
        exchanges: list[tuple[str | None, str]] = []
        question: str | None = None
        for message in store.messages(conversation.id):
            if message.role == "user":
                question = message.content
            elif message.role == "assistant" and message.content.strip():
                exchanges.append((question, message.content))
                question = None
        for asked, reply in reversed(exchanges):
            reply_ids = tokens.text(reply)
            yield reply_ids if asked is None else exchange(tokens.asked(asked), reply_ids)


def stored_chats(database: Path, tokens: HistoryTokens) -> Iterator[Sequence[int]]:
    """The chats stored at `database` as token ids, read through a connection of their own
    (on the thread that builds the index); a history that cannot be read leaves the index
    empty or partial, never a load failed."""
    try:
        store = ConversationStore(database)
    except (StoreError, OSError) as exc:
        log.warning("the past-chats index starts empty: %s", exc)
        return
    try:
        yield from stored_documents(store, tokens)
    except (StoreError, OSError) as exc:
        log.warning("the past-chats index was rebuilt from part of the history: %s", exc)
    finally:
        store.close()


def newest_within(
    documents: Iterable[Sequence[int]], bound: int, longest: int, shortest: int
) -> tuple[list[array[int]], set[bytes]]:
    """The documents (newest first) a corpus of `bound` tokens would keep reading them, oldest
    first, with the digests of all read: each cut to its last `longest` tokens, those under
    `shortest` and copies of a newer one left out, and reading stopped once past the bound,
    since older ones would be dropped at once. A history read lazily is closed then."""
    kept: list[array[int]] = []
    digests: set[bytes] = set()
    read = 0
    iterator = iter(documents)
    try:
        for tokens in iterator:
            document = array("i", tokens)[-longest:]
            digest = document_digest(document)
            if len(document) < shortest or digest in digests:
                continue
            digests.add(digest)
            kept.append(document)
            read += len(document)
            if read > bound:
                break  # past the bound: older ones would go with the oldest of these
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:  # a history read lazily lets its connection go now
            close()
    kept.reverse()
    return kept, digests
