"""Typed errors, and the one sentence a user reads for each (`user_message`).

Every user-facing failure is a SpecChatError whose str() is one readable line naming the file
or setting at fault, never a Python repr. `user_message(exc, front)` is what every front end
shows: the CLI prints `error: <message>`, the server sends it as the error's message, the window
shows it as a sentence. Only the remedy for a full context differs by front end, since each
sets the context size in its own place (a flag, Settings); that difference lives here too.
"""

from __future__ import annotations

from dataclasses import dataclass


class SpecChatError(Exception):
    """Base class for errors caused by user input or the user's files, not by bugs."""


class _FactsError(SpecChatError):
    """An error whose message is worded from the facts it was raised with. Errors cross a
    process boundary (app/engine/isolated.py) by pickle, which rebuilds this one from those
    facts with its own __init__ (Exception's way would pass it the message alone)."""

    def __init__(self, message: str, *facts: object) -> None:
        super().__init__(message)
        self._facts = facts

    def __reduce__(self) -> tuple[type[_FactsError], tuple[object, ...]]:
        return (type(self), self._facts)


# A model file's commonest faults, in the same words wherever they are found: the loader's
# first checks (app.llama.facts), the header reader and the model library (models.gguf).
NO_SUCH_FILE = "no such file"
EMPTY_FILE = "the file is empty"
NOT_GGUF = "not a GGUF file (it does not begin with the bytes GGUF)"
A_FOLDER = "a folder, not a GGUF file"
NOT_REGULAR = "not a regular file"


class ModelLoadError(_FactsError):
    """A model file is missing, unreadable, not a GGUF, truncated, or llama.cpp refused it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot load model {path!s}: {reason}", path, reason)
        self.path = path
        self.reason = reason


class DraftIncompatibleError(_FactsError):
    """The draft cannot speculate for the target (different vocabulary or special tokens)."""

    def __init__(self, draft: str, target: str, reason: str) -> None:
        super().__init__(
            f"draft {draft} is not compatible with target {target}: {reason}", draft, target, reason
        )
        self.draft = draft
        self.target = target
        self.reason = reason


class ContextOverflowError(_FactsError):
    """The prompt does not fit in the context window."""

    def __init__(self, n_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"the prompt is {n_tokens} tokens but the context holds {n_ctx}", n_tokens, n_ctx
        )
        self.n_tokens = n_tokens
        self.n_ctx = n_ctx


class SystemPromptOverflowError(ContextOverflowError):
    """The system message alone does not fit in the context window, so no new chat or shorter
    question can help; n_tokens is the system message's own."""


class KvCacheFullError(_FactsError):
    """llama.cpp found no room in the KV cache for a batch, although the history fits n_ctx."""

    def __init__(self, n_cached: int, n_new: int, n_ctx: int) -> None:
        # The log's line; the user reads user_message's plainer words.
        super().__init__(
            f"the model's KV cache has no room for {n_new} more tokens after {n_cached} "
            f"(context of {n_ctx} tokens)",
            n_cached,
            n_new,
            n_ctx,
        )
        self.n_cached = n_cached
        self.n_new = n_new
        self.n_ctx = n_ctx


class InvalidSettingError(SpecChatError):
    """A setting is out of range or contradicts another one."""


class SettingValueError(InvalidSettingError, _FactsError):
    """One setting's value is out of its range; `setting` is its GenerationConfig field name
    (app/engine/config.py), so a front end can name it in its own terms (the server: the
    request field)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message, setting, message)
        self.setting = setting


class DownloadError(SpecChatError):
    """A Hub download failed: not found, network, checksum mismatch, or no disk space."""


class Cancelled(SpecChatError):  # noqa: N818 - reads as an outcome, like asyncio.CancelledError
    """The user stopped a long operation; not shown as an error."""


class RpcError(SpecChatError):
    """A remote worker (llama.cpp's RPC backend) could not be used."""


class RpcUnavailableError(RpcError):
    """The installed llama.cpp was built without the RPC backend."""


class RpcConnectError(RpcError, _FactsError):
    """A worker is unreachable, did not complete the handshake, or speaks another version."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"RPC worker {endpoint}: {reason}", endpoint, reason)
        self.endpoint = endpoint
        self.reason = reason


class RpcWorkerLostError(RpcError):
    """The process running a worker-backed model died or a worker stopped answering mid-way."""


@dataclass(frozen=True, slots=True)
class Front:
    """How one front end words its errors.

    prompt names what did not fit, shorten how its user makes that smaller, context_size where
    the context is raised, and sentences sets each message as a sentence (capital, full stop)
    rather than a clause after `error:`.
    """

    prompt: str
    shorten: str
    start_afresh: str
    context_size: str
    sentences: bool

    @property
    def more_context(self) -> str:
        """How its user gets room for a prompt that did not fit."""
        return f"{self.shorten} or raise {self.context_size}"

    @property
    def more_memory(self) -> str:
        """How its user gets room when the cache filled up mid-reply."""
        return f"{self.start_afresh} or raise {self.context_size}"


TERMINAL = Front(
    "the prompt", "shorten the prompt", "shorten the prompt", "--n-ctx", sentences=False
)
"""The CLI, and the server, whose context size is `specchat serve --n-ctx`."""
WINDOW = Front(
    "the conversation",
    # A message too long alone is helped by no new chat: both ways are named.
    "shorten your message, start a new chat",
    "start a new chat",
    "the context size in Settings",
    sentences=True,
)


def user_message(exc: SpecChatError, front: Front = TERMINAL) -> str:
    """The one line a user reads for exc, in front's wording."""
    if isinstance(exc, Cancelled):
        text = "cancelled"
    elif isinstance(exc, SystemPromptOverflowError):
        # A new chat or a shorter prompt keeps the same system message: no help.
        text = (
            f"the system prompt alone is {exc.n_tokens} tokens but the context holds "
            f"{exc.n_ctx}; shorten it or raise {front.context_size}"
        )
    elif isinstance(exc, ContextOverflowError):
        text = (
            f"{front.prompt} is {exc.n_tokens} tokens but the context holds {exc.n_ctx}; "
            f"{front.more_context}"
        )
    elif isinstance(exc, KvCacheFullError):
        # Not a prompt that is too long: the cache ran out mid-reply, so its own words.
        text = (
            f"the model's memory for this conversation is full ({exc.n_ctx} tokens of "
            f"context); {front.more_memory}"
        )
    else:
        text = str(exc)
    return as_sentence(text) if front.sentences else text


def as_sentence(text: str) -> str:
    """text on one line, with a capital first letter and a full stop."""
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
