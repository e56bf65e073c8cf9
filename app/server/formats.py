"""OpenAI's response objects for one request: chat.completion(.chunk) or text_completion.

A stream with `stream_options.include_usage` ends as OpenAI's does: every chunk carries
`"usage": null` but the last, which has no choices and the usage. `timings` and `speculation`
ride on the stream's last chunk before [DONE] (as llama-server puts its timings).

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

    def _envelope(self, obj: str, choice: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": obj,
            "created": self._created,
            "model": self._model,
            "choices": [] if choice is None else [{"index": 0, **choice}],
        }

    def _figures(self, result: GenerationResult, started: Started) -> dict[str, Any]:
        request = self._request
        return {
            "timings": timings(result, started),
            "speculation": speculation(
                result, request.n_max, request.config.p_min, request.notices
            ),
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
        """Held text as a tool call or as text, the finish_reason chunk, then (when asked for)
        the usage chunk; the last of them carries timings and speculation."""
        held, self._held = self._held, None
        calls = self._calls(held)
        if calls is not None:
            deltas = [{"index": i, **call} for i, call in enumerate(calls)]
            chunks = [
                self._chunk({"delta": {"tool_calls": deltas}, "finish_reason": None}),
                self._finish_chunk("tool_calls"),
            ]
        else:
            # A token the reply was cut in has no text of its own (a character's first bytes)
            # but has its log probability, which goes out with no text.
            chunks = [self.text_chunk(held or "")] if held or self.logprobs else []
            chunks.append(self._finish_chunk(finish_reason(result.finish_reason, stop_hit)))
        if self._request.include_usage:
            last = self._envelope(self._chunk_object, None)
            last["usage"] = usage(result, started)
            chunks.append(last)
        chunks[-1].update(self._figures(result, started))
        return chunks

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

    def _finish_chunk(self, reason: str) -> dict[str, Any]:
        if self.chat:
            return self._chunk({"delta": {}, "finish_reason": reason})
        return self._chunk({"text": "", "logprobs": None, "finish_reason": reason})

    @property
    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    def _chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        chunk = self._envelope(self._chunk_object, choice)
        if self._request.include_usage:
            chunk["usage"] = None  # OpenAI's: only the last chunk's is set
        return chunk

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
