"""`response_format` through a real `specchat serve` and the real `openai` client: twelve JSON
schemas, each answered with speculation on, with speculation off, and with the grammar on the
target only; every reply parses and validates, and the three are the same greedy reply.

What masking the draft is worth is measured on the engine (tests/integration/engine/
test_grammar_engine.py): here the suffix index learns each reply from the requests before it,
so acceptance depends on the order of the requests."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import openai
import pytest

from tests.helpers.json_schemas import SCHEMAS
from tests.integration.server.conftest import API_KEY, Server

pytestmark = pytest.mark.network

MAX_JSON_TOKENS = 160
CHAT = "/v1/chat/completions"
Reply = dict[str, Any]


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def ask(client: openai.OpenAI, prompt: str, schema: dict[str, Any], **speculative: Any) -> Reply:
    completion = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": prompt}],
        temperature=0,
        max_tokens=MAX_JSON_TOKENS,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": schema, "strict": True},
        },
        extra_body={"speculative": speculative} if speculative else None,
    )
    return completion.to_dict()


@pytest.fixture(scope="module")
def replies(client: openai.OpenAI) -> dict[str, dict[str, Reply]]:
    """For each schema: speculating (draft masked too), plain, and with an unmasked draft."""
    return {
        name: {
            "speculative": ask(client, prompt, schema),
            "plain": ask(client, prompt, schema, n_max=0),
            "draft unmasked": ask(client, prompt, schema, constrain_draft=False),
        }
        for name, (prompt, schema) in SCHEMAS.items()
    }


def content(reply: Reply) -> str:
    text = reply["choices"][0]["message"]["content"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_speculative_reply_parses_and_validates(
    replies: dict[str, dict[str, Reply]], name: str
) -> None:
    reply = replies[name]["speculative"]
    assert reply["choices"][0]["finish_reason"] == "stop", content(reply)
    jsonschema.validate(json.loads(content(reply)), SCHEMAS[name][1])
    assert reply["speculation"]["drafted"] > 0


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_greedy_speculation_under_a_schema_is_the_plain_reply(
    replies: dict[str, dict[str, Reply]], name: str
) -> None:
    runs = replies[name]
    assert content(runs["speculative"]) == content(runs["plain"])
    assert runs["plain"]["speculation"]["drafted"] == 0
    assert content(runs["draft unmasked"]) == content(runs["plain"])


def test_json_object_mode_streams_an_object(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="any",
        messages=[
            {"role": "user", "content": "Give the name and age of a person as a JSON object."}
        ],
        temperature=0,
        max_tokens=MAX_JSON_TOKENS,
        response_format={"type": "json_object"},
        stream=True,
    )
    chunks: list[dict[str, Any]] = [chunk.to_dict() for chunk in stream]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop", text
    assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize(
    ("response_format", "param"),
    [
        ({"type": "xml"}, "response_format.type"),
        ({"type": "json_schema", "json_schema": {"schema": []}}, "response_format.json_schema"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "number", "minimum": 1}}},
            "response_format",
        ),
        ("json", "response_format"),
    ],
)
def test_a_response_format_the_server_cannot_hold_is_refused_naming_it(
    server: Server, response_format: Any, param: str
) -> None:
    body = {
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 2,
        "response_format": response_format,
    }
    status, payload = server.request("POST", CHAT, body)
    assert status == 400, payload
    assert payload["error"]["param"].startswith(param), payload
