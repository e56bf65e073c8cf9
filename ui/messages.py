"""The window's words for an exception: app.errors.user_message for user errors.

A StoreError (the chat history) already carries a readable line; it is shown as a sentence.
Anything else is a bug: the user gets a short sentence, the traceback goes to the log only.
Cancelled is an outcome the user chose, so it reads as a plain status, not an error.
"""

from __future__ import annotations

import logging

from app.errors import WINDOW, Cancelled, SpecChatError, as_sentence, user_message
from app.store_errors import StoreError

log = logging.getLogger(__name__)


def describe(exc: BaseException, *, logged: bool = False) -> str:
    """One readable sentence for `exc`; logs a traceback for unexpected (bug) exceptions unless
    `logged` says where it was raised already did (the job driver logs every job's bugs)."""
    if isinstance(exc, SpecChatError):
        return user_message(exc, WINDOW)
    if isinstance(exc, StoreError):
        return as_sentence(str(exc))
    if not logged:
        log.error("unexpected error", exc_info=exc)
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return as_sentence(f"Something went wrong ({detail}); the details are in the log")


def is_cancel(exc: BaseException) -> bool:
    return isinstance(exc, Cancelled)
