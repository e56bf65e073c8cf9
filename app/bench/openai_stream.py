"""One streamed reply from an OpenAI-compatible server, timed as it arrives.

Only the standard library (http.client), so that benching a server needs nothing the app does
not already ship. Each `data:` line is stamped with the time it was read: the first one that
carries text is the first token, the last one that carries text is the last token. The token
count and the draft figures come from what the server reports (`usage`, llama-server's
`timings`), never from counting chunks: a speculative server sends a round's tokens together.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidSettingError, SpecChatError

# How long a server may send nothing, to a connection or a read, before its request fails
# (`bench --timeout`): a CPU server reading a long prompt is silent for seconds, one that hung
# is silent for good, and the runs before it should not wait ten minutes to be reported.
READ_TIMEOUT_S = 120.0
# What one line of a stream, an error body or the model list may hold: far past any real one,
# and a hostile or broken server cannot fill memory.
MAX_LINE_BYTES = 4 * 2**20
MAX_BODY_BYTES = 4 * 2**20
_CHAT_PATH = "/chat/completions"
_TEXT_PATH = "/completions"
_CUT = "the stream ended before the reply did"


class RemoteServerError(SpecChatError):
    """A benched server could not be reached, refused a request, or answered in a form the
    benchmark cannot read."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A server to bench: its label in the report and the base of its OpenAI API (`.../v1`)."""

    label: str
    scheme: str
    host: str
    port: int
    base_path: str
    api_key: str | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.base_path}"

    @property
    def netloc(self) -> str:
        """host:port as a URL writes it: an IPv6 address in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=timeout)

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out


def parse_endpoint(value: str, api_key: str | None = None) -> Endpoint:
    """`--server [LABEL=]URL`. The URL may stop at the host, at `/v1`, or name the chat path;
    the label defaults to host:port."""
    label, sep, url = value.partition("=")
    if not sep or "/" in label or ":" in label:
        label, url = "", value
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSettingError(
            f"--server {value!r}: expected [LABEL=]http://HOST:PORT, e.g. http://127.0.0.1:8080"
        )
    try:
        port = parts.port
    except ValueError:
        raise InvalidSettingError(f"--server {value!r}: the port is not a number 1-65535") from None
    if port == 0:  # no server listens there; `or` would have read it as the scheme's default
        raise InvalidSettingError(f"--server {value!r}: the port is not a number 1-65535")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    path = parts.path.rstrip("/")
    for suffix in (_CHAT_PATH, _TEXT_PATH):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if not path:
        path = "/v1"
    endpoint = Endpoint("", parts.scheme, parts.hostname, port, path, api_key)
    return replace(endpoint, label=label.strip() or endpoint.netloc)


@dataclass(frozen=True, slots=True)
class StreamedReply:
    """What one streamed request produced, with its times in seconds from sending it."""

    text: str
    completion_tokens: int
    first_token_s: float
    last_token_s: float
    finish_reason: str | None
    timings: dict[str, Any] | None

    @property
    def draft_n(self) -> int | None:
        return _count(self.timings, "draft_n")

    @property
    def draft_n_accepted(self) -> int | None:
        return _count(self.timings, "draft_n_accepted")


def _count(timings: dict[str, Any] | None, name: str) -> int | None:
    value = None if timings is None else timings.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stream_reply(
    endpoint: Endpoint, body: dict[str, Any], *, chat: bool, timeout: float = READ_TIMEOUT_S
) -> StreamedReply:
    """POST `body` with streaming on, read the reply to its end, and time it; `timeout` bounds
    the connection and every read, not the whole reply."""
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    path = endpoint.base_path + (_CHAT_PATH if chat else _TEXT_PATH)
    conn = endpoint.connection(timeout)
    try:
        start = time.perf_counter()
        conn.request("POST", path, json.dumps(payload).encode(), endpoint.headers())
        response = conn.getresponse()
        if response.status != 200:
            raise RemoteServerError(
                f"{endpoint.label} refused the request: HTTP {response.status}"
                f"{_error_detail(response.read(MAX_BODY_BYTES))}"
            )
        return _read_stream(endpoint, response, start, timeout)
    except (OSError, http.client.HTTPException) as exc:
        raise RemoteServerError(
            f"{endpoint.label} at {endpoint.url}: {_reason(exc, timeout)}"
        ) from None
    finally:
        conn.close()


def served_model(endpoint: Endpoint, timeout: float = READ_TIMEOUT_S) -> str | None:
    """The first model id of GET /v1/models: a reachability check before anything is timed,
    and the `model` that servers which require one are sent. None when the list is empty or
    not offered (llama-server and SpecChat need no model name)."""
    conn = endpoint.connection(timeout)
    try:
        conn.request("GET", endpoint.base_path + "/models", headers=endpoint.headers())
        response = conn.getresponse()
        raw = response.read(MAX_BODY_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise RemoteServerError(
            f"cannot reach {endpoint.label} at {endpoint.url}: {_reason(exc, timeout)}"
        ) from None
    finally:
        conn.close()
    if response.status in (401, 403):
        raise RemoteServerError(
            f"{endpoint.label} refused the request: HTTP {response.status}{_error_detail(raw)} "
            "(does it need --api-key?)"
        )
    if response.status != 200:
        return None
    try:
        data = json.loads(raw)["data"]
        model = data[0]["id"] if data else None
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return None
    return model if isinstance(model, str) else None


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, http.client.IncompleteRead):
        return _CUT
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"no answer for {timeout:g} s (--timeout)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _error_detail(raw: bytes) -> str:
    """`: message` from an OpenAI-style error body, or its first line of text."""
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError, RecursionError):
        message = raw.decode("utf-8", errors="replace").strip().splitlines()[:1]
        message = message[0] if message else None
    return f": {str(message)[:200]}" if message else ""


def _read_stream(
    endpoint: Endpoint, response: http.client.HTTPResponse, start: float, timeout: float
) -> StreamedReply:
    pieces: list[str] = []
    first: float | None = None
    last: float | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    finish: str | None = None
    events = 0
    done = False
    last_event = 0.0
    while raw_line := response.readline(MAX_LINE_BYTES + 1):
        if len(raw_line) > MAX_LINE_BYTES:
            raise RemoteServerError(
                f"{endpoint.label} sent a stream line longer than {MAX_LINE_BYTES // 2**20} MiB"
            )
        now = time.perf_counter() - start
        line = raw_line.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            # Blank separators, `event:` lines, and comments, which a server may send to keep
            # the connection open: they are not the reply going on.
            if now - last_event > timeout:
                raise RemoteServerError(
                    f"{endpoint.label} at {endpoint.url}: no reply data for {timeout:g} s "
                    "(--timeout), only keep-alive lines"
                )
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        last_event = now
        events += 1
        chunk = _json_chunk(endpoint, data)
        usage = _dict(chunk.get("usage")) or usage
        timings = _dict(chunk.get("timings")) or timings
        for choice in _choices(endpoint, chunk):
            text = _choice_text(choice)
            if text:
                pieces.append(text)
                first = now if first is None else first
                last = now
            finish = choice.get("finish_reason") or finish
    if events == 0:
        raise RemoteServerError(f"{endpoint.label} did not stream the reply (no `data:` events)")
    if not done and finish is None:
        # Usage may ride on any chunk (some servers put it on every one): only a finish_reason
        # or [DONE] says the reply is whole.
        raise RemoteServerError(
            f"{endpoint.label} at {endpoint.url}: {_CUT} (no finish_reason, no [DONE])"
        )
    tokens = _completion_tokens(usage, timings)
    if tokens is None:
        raise RemoteServerError(
            f"{endpoint.label} reported neither usage.completion_tokens nor "
            "timings.predicted_n, so its tokens cannot be counted"
        )
    end = time.perf_counter() - start
    return StreamedReply(
        "".join(pieces),
        tokens,
        end if first is None else first,
        end if last is None else last,
        finish,
        timings,
    )


def _json_chunk(endpoint: Endpoint, data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):
        raise RemoteServerError(
            f"{endpoint.label} sent a stream event that is not JSON: {data[:80]!r}"
        ) from None
    if not isinstance(chunk, dict):
        raise RemoteServerError(f"{endpoint.label} sent a stream event that is not an object")
    if "error" in chunk:
        raise RemoteServerError(f"{endpoint.label} failed mid-reply{_error_detail(data.encode())}")
    return chunk


def _choices(endpoint: Endpoint, chunk: dict[str, Any]) -> list[dict[str, Any]]:
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise RemoteServerError(
            f"{endpoint.label} sent a stream event in an unexpected form "
            "(its choices are not a list of objects)"
        )
    return choices


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) and value else None


def _choice_text(choice: Any) -> str:
    if not isinstance(choice, dict):
        return ""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        # A reasoning model's thinking is tokens too: it counts for the first-token time.
        parts = (delta.get("content"), delta.get("reasoning_content"))
        return "".join(p for p in parts if isinstance(p, str))
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def _completion_tokens(usage: dict[str, Any] | None, timings: dict[str, Any] | None) -> int | None:
    for source, name in ((usage, "completion_tokens"), (timings, "predicted_n")):
        value = _count(source, name)
        if value is not None:
            return value
    return None
