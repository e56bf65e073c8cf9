"""OpenAI's response objects for one request: chat.completion(.chunk) or text_completion.

A reply that may be a tool call is held back while it could still be one (app/server/tools.py):
from its start under a required call, under "auto" while its start can still open a call in
the model's syntax (`{`, or `<tool_call>`); text that cannot be a call streams as it comes.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.engine.job_driver import Started
from app.engine.logprobs import TokenLogprob
from app.engine.result import GenerationResult
from app.server.logprob_format import CompletionLogprobs, chat_logprobs
from app.server.schemas import ApiRequest
from app.server.timings import finish_reason, speculation, timings, usage
from app.server.tools import read_calls


class ReplyFormat:
    def __init__(self, request: ApiRequest, model: str) -> None:
        self.chat = request.messages is not None
        self._request = request
        self._model = model
        prefix = "chatcmpl-" if self.chat else "cmpl-"
        self._id = prefix + uuid.uuid4().hex[:24]
        self._created = int(time.time())
        tools = request.tools
        self._tools = tools if tools is not None and tools.offered else None
        # Text held back because it may still turn out to be a call; None once it cannot.
        self._held: str | None = "" if self._tools is not None else None
        # The tokens' log probabilities not sent yet, filled by the reply stream when asked for.
        top = request.config.logprobs
        self.logprobs: list[TokenLogprob] | None = None if top is None else []
        self._legacy = CompletionLogprobs(top or 0)

    def _envelope(self, obj: str, choice: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": obj,
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, **choice}],
        }

    def _figures(self, result: GenerationResult, started: Started) -> dict[str, Any]:
        request = self._request
        return {
            "timings": timings(result, started),
            "speculation": speculation(result, request.n_max, request.config.p_min),
        }

    # -- streaming ----------------------------------------------------------------------------

    def opening_chunk(self) -> dict[str, Any] | None:
        if not self.chat:
            return None
        return self._chunk({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})

    def text_chunks(self, text: str) -> list[dict[str, Any]]:
        if self._held is not None and self._tools is not None:
            self._held += text
            start = self._held.lstrip()
            if self._tools.choice != "auto" or not start or self._tools.dialect.may_be_call(start):
                return []
            text, self._held = self._held, None
        return [self.text_chunk(text)]

    def closing_chunks(
        self, result: GenerationResult, started: Started, stop_hit: bool
    ) -> list[dict[str, Any]]:
        """Held text as a tool call or as text, then the closing chunk."""
        held, self._held = self._held, None
        calls = self._calls(held)
        if calls is not None:
            deltas = [{"index": i, **call} for i, call in enumerate(calls)]
            chunk = self._chunk({"delta": {"tool_calls": deltas}, "finish_reason": None})
            return [chunk, self.closing_chunk(result, started, stop_hit, tool_calls=True)]
        opening = [self.text_chunk(held)] if held else []
        return [*opening, self.closing_chunk(result, started, stop_hit)]

    def _calls(self, text: str | None) -> list[dict[str, Any]] | None:
        if text is None or self._tools is None:
            return None
        return read_calls(text, self._tools)

    def text_chunk(self, text: str) -> dict[str, Any]:
        logprobs = self._take_logprobs()
        if self.chat:
            choice: dict[str, Any] = {"delta": {"content": text}, "finish_reason": None}
            if logprobs is not None:
                choice["logprobs"] = logprobs
            return self._chunk(choice)
        return self._chunk({"text": text, "logprobs": logprobs, "finish_reason": None})

    def _take_logprobs(self) -> dict[str, Any] | None:
        """The pending tokens' log probabilities in this endpoint's shape (None when not asked)."""
        if self.logprobs is None:
            return None
        entries, self.logprobs[:] = list(self.logprobs), []
        return chat_logprobs(entries) if self.chat else self._legacy.shape(entries)

    def closing_chunk(
        self,
        result: GenerationResult,
        started: Started,
        stop_hit: bool,
        *,
        tool_calls: bool = False,
    ) -> dict[str, Any]:
        """The last chunk: finish_reason, timings and speculation (and usage when asked)."""
        reason = "tool_calls" if tool_calls else finish_reason(result.finish_reason, stop_hit)
        if self.chat:
            choice: dict[str, Any] = {"delta": {}, "finish_reason": reason}
        else:
            choice = {"text": "", "logprobs": None, "finish_reason": reason}
        chunk = self._chunk(choice)
        if self._request.include_usage:
            chunk["usage"] = usage(result, started)
        chunk.update(self._figures(result, started))
        return chunk

    def _chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        return self._envelope("chat.completion.chunk" if self.chat else "text_completion", choice)

    # -- whole replies ------------------------------------------------------------------------

    def completion(
        self, text: str, result: GenerationResult, started: Started, stop_hit: bool
    ) -> dict[str, Any]:
        reason = finish_reason(result.finish_reason, stop_hit)
        calls = self._calls(text)
        if calls is not None:
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            reason = "tool_calls"
        else:
            message = {"role": "assistant", "content": text}
        if self.chat:
            choice: dict[str, Any] = {
                "message": message,
                "logprobs": self._take_logprobs(),
                "finish_reason": reason,
            }
            body = self._envelope("chat.completion", choice)
        else:
            choice = {"text": text, "logprobs": self._take_logprobs(), "finish_reason": reason}
            body = self._envelope("text_completion", choice)
        body["usage"] = usage(result, started)
        body.update(self._figures(result, started))
        return body
