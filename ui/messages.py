"""The one place that turns an exception into the sentence the user reads.

User errors (SpecChatError, StoreError) already carry a readable line; it is shown as a sentence.
Anything else is a bug: the user gets a short sentence, the traceback goes to the log only.
Cancelled is an outcome the user chose, so it reads as a plain status, not an error.
"""

from __future__ import annotations

import logging

from app.errors import Cancelled, ContextOverflowError, KvCacheFullError, SpecChatError
from app.store import StoreError

log = logging.getLogger(__name__)


def sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def describe(exc: BaseException) -> str:
    """One readable sentence for `exc`; logs a traceback for unexpected (bug) exceptions."""
    if isinstance(exc, Cancelled):
        return "Cancelled."
    if isinstance(exc, ContextOverflowError):
        # The engine's own wording names the CLI flag; the window has a setting instead.
        return (
            f"The conversation is {exc.n_tokens} tokens but the context holds {exc.n_ctx}; "
            "start a new chat or raise the context size in Settings."
        )
    if isinstance(exc, KvCacheFullError):
        return (
            f"The model's memory for this conversation is full ({exc.n_ctx} tokens of "
            "context); start a new chat or raise the context size in Settings."
        )
    if isinstance(exc, SpecChatError | StoreError):
        return sentence(str(exc))
    log.error("unexpected error", exc_info=exc)
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return sentence(f"Something went wrong ({detail}); the details are in the log")


def is_cancel(exc: BaseException) -> bool:
    return isinstance(exc, Cancelled)
