"""What the past-chats index learns from a reply (Runtime feeds it; app/engine/history_corpus.py
holds it): the exchange as one document, learnt once the reply has finished, and only the part
of it the receiver kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent

# Tokens of the prompt's end kept with each reply in the past-chats index: the question and
# the turn markers before the reply, so that the same question asked again matches and drafts
# the old reply from its first token.
REMEMBERED_PROMPT_TOKENS = 256

HistorySource = Callable[[Callable[[str], Sequence[int]]], Iterable[Sequence[int]]]
"""Every stored prompt and reply as token ids, given a tokenizer: what a past-chats index is
rebuilt from when its file is missing or damaged, or after chats were deleted."""


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
