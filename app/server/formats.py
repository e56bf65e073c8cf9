"""OpenAI's response objects for one request: chat.completion(.chunk) or text_completion."""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.engine.job_queue import Started
from app.engine.result import GenerationResult
from app.server.schemas import ApiRequest
from app.server.timings import finish_reason, speculation, timings, usage


class ReplyFormat:
    def __init__(self, request: ApiRequest, model: str) -> None:
        self.chat = request.messages is not None
        self._request = request
        self._model = model
        prefix = "chatcmpl-" if self.chat else "cmpl-"
        self._id = prefix + uuid.uuid4().hex[:24]
        self._created = int(time.time())

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

    def text_chunk(self, text: str) -> dict[str, Any]:
        if self.chat:
            return self._chunk({"delta": {"content": text}, "finish_reason": None})
        return self._chunk({"text": text, "logprobs": None, "finish_reason": None})

    def closing_chunk(
        self, result: GenerationResult, started: Started, stop_hit: bool
    ) -> dict[str, Any]:
        """The last chunk: finish_reason, timings and speculation (and usage when asked)."""
        reason = finish_reason(result.finish_reason, stop_hit)
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
        if self.chat:
            choice: dict[str, Any] = {
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": reason,
            }
            body = self._envelope("chat.completion", choice)
        else:
            choice = {"text": text, "logprobs": None, "finish_reason": reason}
            body = self._envelope("text_completion", choice)
        body["usage"] = usage(result, started)
        body.update(self._figures(result, started))
        return body
