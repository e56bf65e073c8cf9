"""Typed errors. Every user-facing failure is a SpecChatError whose str() is one readable line.

The CLI prints `error: <str(exc)>` and the window shows the same sentence, so messages name the
file or setting at fault and what to do, never a Python repr.
"""

from __future__ import annotations


class SpecChatError(Exception):
    """Base class for errors caused by user input or the user's files, not by bugs."""


class ModelLoadError(SpecChatError):
    """A model file is missing, unreadable, not a GGUF, truncated, or llama.cpp refused it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot load model {path!s}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[type[ModelLoadError], tuple[str, str]]:
        # Errors cross a process boundary (app/engine/isolated.py) by pickle.
        return (type(self), (self.path, self.reason))


class DraftIncompatibleError(SpecChatError):
    """The draft cannot speculate for the target (different vocabulary or special tokens)."""

    def __init__(self, draft: str, target: str, reason: str) -> None:
        super().__init__(f"draft {draft} is not compatible with target {target}: {reason}")
        self.draft = draft
        self.target = target
        self.reason = reason

    def __reduce__(self) -> tuple[type[DraftIncompatibleError], tuple[str, str, str]]:
        return (type(self), (self.draft, self.target, self.reason))


class ContextOverflowError(SpecChatError):
    """The prompt does not fit in the context window."""

    def __init__(self, n_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"prompt is {n_tokens} tokens but the context holds {n_ctx}; "
            "shorten the prompt or raise --n-ctx"
        )
        self.n_tokens = n_tokens
        self.n_ctx = n_ctx

    def __reduce__(self) -> tuple[type[ContextOverflowError], tuple[int, int]]:
        return (type(self), (self.n_tokens, self.n_ctx))


class KvCacheFullError(SpecChatError):
    """llama.cpp found no room in the KV cache for a batch, although the history fits n_ctx."""

    def __init__(self, n_cached: int, n_new: int, n_ctx: int) -> None:
        super().__init__(
            f"the model's KV cache has no room for {n_new} more tokens after {n_cached} "
            f"(context of {n_ctx} tokens); start a new conversation or raise --n-ctx"
        )
        self.n_cached = n_cached
        self.n_new = n_new
        self.n_ctx = n_ctx


class InvalidSettingError(SpecChatError):
    """A setting is out of range or contradicts another one."""


class DownloadError(SpecChatError):
    """A Hub download failed: not found, network, checksum mismatch, or no disk space."""


class Cancelled(SpecChatError):  # noqa: N818 - reads as an outcome, like asyncio.CancelledError
    """The user stopped a long operation; not shown as an error."""


class RpcError(SpecChatError):
    """A remote worker (llama.cpp's RPC backend) could not be used."""


class RpcUnavailableError(RpcError):
    """The installed llama.cpp was built without the RPC backend."""


class RpcConnectError(RpcError):
    """A worker is unreachable, did not complete the handshake, or speaks another version."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"RPC worker {endpoint}: {reason}")
        self.endpoint = endpoint
        self.reason = reason

    def __reduce__(self) -> tuple[type[RpcConnectError], tuple[str, str]]:
        return (type(self), (self.endpoint, self.reason))


class RpcWorkerLostError(RpcError):
    """The process running a worker-backed model died or a worker stopped answering mid-way."""
