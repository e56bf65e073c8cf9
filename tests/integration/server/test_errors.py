"""Bad requests get OpenAI-style 4xx JSON and leave the server answering; keys and binding."""

from __future__ import annotations

import http.client
from typing import Any

import openai
import psutil
import pytest

from tests.integration.server.conftest import API_KEY, MAX_TOKENS, N_CTX, Server

pytestmark = pytest.mark.network

HELLO = [{"role": "user", "content": "Say hello."}]
CHAT = "/v1/chat/completions"


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": HELLO, **fields}


BAD_REQUESTS: list[tuple[str, str, str, bytes | dict[str, Any] | None, int, str]] = [
    ("malformed JSON", "POST", CHAT, b'{"messages": [', 400, "invalid_json"),
    ("NaN literal", "POST", CHAT, b'{"messages": [], "temperature": NaN}', 400, "invalid_json"),
    ("body not an object", "POST", CHAT, b"[1, 2]", 400, "invalid_request"),
    ("missing messages", "POST", CHAT, {"model": "x"}, 400, "missing_field"),
    ("messages not a list", "POST", CHAT, {"messages": "hi"}, 400, "invalid_type"),
    ("message without role", "POST", CHAT, {"messages": [{"content": "x"}]}, 400, "invalid_type"),
    ("image content", "POST", CHAT, {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, "invalid_value"),
    ("temperature a string", "POST", CHAT, chat(temperature="hot"), 400, "invalid_type"),
    ("temperature too high", "POST", CHAT, chat(temperature=5), 400, "invalid_value"),
    ("infinite top_p", "POST", CHAT, b'{"messages": [{"role": "user", "content": "x"}], '
     b'"top_p": 1e999}', 400, "invalid_value"),
    ("top_p above one", "POST", CHAT, chat(top_p=1.5), 400, "invalid_value"),
    ("negative top_k", "POST", CHAT, chat(top_k=-1), 400, "invalid_value"),
    ("max_tokens zero", "POST", CHAT, chat(max_tokens=0), 400, "invalid_value"),
    ("max_tokens boolean", "POST", CHAT, chat(max_tokens=True), 400, "invalid_type"),
    ("max_tokens float", "POST", CHAT, chat(max_tokens=2.5), 400, "invalid_type"),
    ("n = 2", "POST", CHAT, chat(n=2), 400, "invalid_value"),
    ("seed negative", "POST", CHAT, chat(seed=-5), 400, "invalid_value"),
    ("stop a number", "POST", CHAT, chat(stop=3), 400, "invalid_type"),
    ("stream a string", "POST", CHAT, chat(stream="yes"), 400, "invalid_type"),
    ("n_max too big", "POST", CHAT, chat(speculative={"n_max": 99}), 400, "invalid_value"),
    ("n_max a word", "POST", CHAT, chat(speculative={"n_max": "fast"}), 400, "invalid_type"),
    ("p_min one", "POST", CHAT, chat(speculative={"p_min": 1.0}), 400, "invalid_value"),
    ("prompt missing", "POST", "/v1/completions", {"max_tokens": 4}, 400, "missing_field"),
    ("prompt token ids", "POST", "/v1/completions", {"prompt": [1, 2]}, 400, "invalid_type"),
    ("prompt longer than the context", "POST", CHAT,
     chat(messages=[{"role": "user", "content": "word " * (2 * N_CTX)}]),
     400, "context_length_exceeded"),
    ("streamed prompt longer than the context", "POST", CHAT,
     chat(stream=True, messages=[{"role": "user", "content": "word " * (2 * N_CTX)}]),
     400, "context_length_exceeded"),
    ("text prompt longer than the context", "POST", "/v1/completions",
     {"prompt": "word " * (2 * N_CTX)}, 400, "context_length_exceeded"),
    ("unknown route", "POST", "/v1/embeddings", chat(), 404, "not_found"),
    ("a trailing slash", "POST", f"{CHAT}/", chat(), 404, "not_found"),
    ("wrong method", "GET", CHAT, None, 405, "method_not_allowed"),
    ("body too large", "POST", CHAT, b" " * (9 * 1024 * 1024), 413, "too_large"),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=[case[0] for case in BAD_REQUESTS])
def test_bad_request_gets_its_json_error(server: Server, case: tuple[Any, ...]) -> None:
    _name, method, path, body, status, code = case
    got_status, payload = server.request(method, path, body)
    assert got_status == status, payload
    error = payload["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    assert "Traceback" not in error["message"]


def test_server_answers_correctly_after_the_bad_requests(server: Server, reference: Any) -> None:
    for _name, method, path, body, _status, _code in BAD_REQUESTS:
        server.request(method, path, body)
    status, payload = server.request("POST", CHAT, chat(temperature=0, max_tokens=MAX_TOKENS))
    assert status == 200, payload
    assert payload["choices"][0]["message"]["content"] == reference("Say hello.")
    assert "Traceback" not in server.log()


def test_the_endpoints_answer_without_v1_too(server: Server) -> None:
    # As llama-server's do: a client given the base URL without /v1 still reaches them.
    status, payload = server.request("POST", "/chat/completions", chat(temperature=0, max_tokens=2))
    assert status == 200 and payload["object"] == "chat.completion", payload
    status, payload = server.request("POST", "/completions", {"prompt": "Hi", "max_tokens": 2})
    assert status == 200 and payload["object"] == "text_completion", payload
    status, payload = server.request("GET", "/models")
    assert status == 200 and payload["data"], payload
    assert server.request("POST", "/chat/completions", chat(), key=None)[0] == 401


@pytest.mark.parametrize("key", [None, "wrong-key"], ids=["missing", "wrong"])
def test_wrong_or_missing_key_is_refused(server: Server, key: str | None) -> None:
    status, payload = server.request("POST", CHAT, chat(max_tokens=2), key=key)
    assert status == 401
    assert payload["error"]["code"] == "invalid_api_key"
    status, _ = server.request("GET", "/v1/models", key=key)
    assert status == 401


@pytest.mark.parametrize("scheme", ["bearer", "BEARER"])
def test_the_key_is_taken_with_the_scheme_in_any_case(server: Server, scheme: str) -> None:
    # RFC 9110: the scheme's name is case-insensitive; "bearer KEY" got 401.
    given = {"Authorization": f"{scheme} {API_KEY}"}
    assert server.request("GET", "/v1/models", headers=given)[0] == 200
    for wrong in (f"Basic {API_KEY}", f"{scheme} wrong-key", API_KEY, f"{scheme}{API_KEY}"):
        status, _ = server.request("GET", "/v1/models", headers={"Authorization": wrong})
        assert status == 401, wrong


def test_openai_client_with_a_wrong_key_gets_an_authentication_error(server: Server) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_health_needs_no_key(server: Server) -> None:
    status, payload = server.request("GET", "/health", key=None)
    assert status == 200
    assert payload["status"] == "ok"


def test_health_reports_the_models_memory_with_the_conversations_the_target_saved(
    server: Server,
) -> None:
    # Two long conversations in turn: the second drops the first's settled tokens from the
    # target's cache, and the prompt cache saves their state.
    for topic in ("rivers", "mountains"):
        status, _ = server.request("POST", CHAT, chat(messages=[_long_question(topic)]))
        assert status == 200
    status, payload = server.request("GET", "/health", key=None)

    assert status == 200
    memory = payload["memory"]
    assert memory["target_weights"] > 0 and memory["draft_weights"] > 0
    assert memory["target_saved"] > 0
    assert "memory" not in payload["requests"]


def _long_question(topic: str) -> dict[str, str]:
    facts = " ".join(f"Fact {i} about {topic} is worth knowing." for i in range(8))
    return {"role": "user", "content": f"{facts} Summarise these facts about {topic}."}


def test_default_bind_listens_on_loopback_only(server: Server) -> None:
    listening = [
        c.laddr
        for c in psutil.Process(server.proc.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", server.port)]


def test_key_check_is_not_fooled_by_a_prefix(server: Server) -> None:
    status, _ = server.request("GET", "/v1/models", key=API_KEY[:-1])
    assert status == 401
    status, _ = server.request("GET", "/v1/models", key=API_KEY + "x")
    assert status == 401


def test_no_cors_preflight_for_an_origin_not_listed(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(
            "OPTIONS",
            CHAT,
            headers={
                "Origin": "https://evil.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()
    assert response.getheader("Access-Control-Allow-Origin") is None
    assert response.status == 403
