"""Replies the suffix index drafts, through a real `specchat serve --draft suffix --exact`: a
question asked again is drafted whole from the answer given before, a round at a time of up to
64 tokens, and what the client gets is still plain decoding's answer. A stop string inside
such a round cuts the reply there, streamed or not, characters of two bytes included;
`max_tokens` holds however far a round could have drafted; a seeded reply, with penalties and
a logit bias, repeats and is plain decoding's, log probabilities included; JSON mode too."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.integration.server.conftest import API_KEY, MAX_TOKENS, Server

pytestmark = pytest.mark.network

CHAT = "/v1/chat/completions"
QUESTION = "Viết một câu về phở Hà Nội 🍜 và một câu tiếng Ba Lan: Zażółć gęślą jaźń. 😀"
AUTO = {"n_max": "auto"}  # the suffix index drafts past the server's γ 4 under auto
PLAIN = {"n_max": 0}


def ask(server: Server, speculative: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {
        "messages": [{"role": "user", "content": QUESTION}],
        "temperature": 0,
        "speculative": speculative,
        **fields,
    }
    status, payload = server.request("POST", CHAT, body)
    assert status == 200, payload
    return payload


def content(answer: dict[str, Any]) -> str:
    return str(answer["choices"][0]["message"]["content"])


def streamed(client: openai.OpenAI, **fields: Any) -> tuple[str, list[str]]:
    """A streamed greedy answer drafted under auto: its text and its finish reasons."""
    text, reasons = [], []
    for chunk in client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": QUESTION}],
        temperature=0,
        stream=True,
        extra_body={"speculative": AUTO},
        **fields,
    ):
        if chunk.choices:
            text.append(chunk.choices[0].delta.content or "")
            if chunk.choices[0].finish_reason:
                reasons.append(chunk.choices[0].finish_reason)
    return "".join(text), reasons


@pytest.fixture(scope="module")
def client(suffix_server: Server) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=suffix_server.base_url, api_key=API_KEY, max_retries=0, timeout=300
    )


@pytest.fixture(scope="module")
def answer(suffix_server: Server) -> str:
    """Plain decoding's greedy answer; the server keeps it among its past replies."""
    plain = ask(suffix_server, PLAIN, max_tokens=MAX_TOKENS)
    assert plain["choices"][0]["finish_reason"] == "length"
    return content(plain)


def test_a_question_asked_again_is_drafted_whole_and_answered_as_before(
    suffix_server: Server, client: openai.OpenAI, answer: str
) -> None:
    again = ask(suffix_server, AUTO, max_tokens=MAX_TOKENS)
    assert content(again) == answer
    assert again["choices"][0]["finish_reason"] == "length"
    # Drafted from the answer before, in rounds far longer than the server's γ.
    assert again["speculation"]["accepted"] > MAX_TOKENS // 2
    assert again["speculation"]["rounds"] <= 3
    assert streamed(client, max_tokens=MAX_TOKENS) == (answer, ["length"])


def _stops(answer: str) -> list[str]:
    """A character of more than one byte, and three characters, each first seen a few
    characters in, so a round that drafts the whole answer runs past them."""
    wide = next(
        ch for i, ch in enumerate(answer) if i >= 3 and ord(ch) > 0x7F and answer.find(ch) == i
    )
    starts = range(3, len(answer) - 3)
    three = next(answer[i : i + 3] for i in starts if answer.find(answer[i : i + 3]) == i)
    return [wide, three]


@pytest.mark.parametrize("which", [0, 1], ids=["wide character", "three characters"])
def test_a_stop_string_inside_a_drafted_round_ends_the_reply_there(
    suffix_server: Server, client: openai.OpenAI, answer: str, which: int
) -> None:
    stop = _stops(answer)[which]
    before = answer[: answer.index(stop)]
    cut = ask(suffix_server, AUTO, max_tokens=MAX_TOKENS, stop=[stop])
    assert content(cut) == before
    assert cut["choices"][0]["finish_reason"] == "stop"
    # The round that completed the stop kept tokens past it, and none of them was returned.
    assert cut["speculation"]["accepted"] + 1 > cut["usage"]["completion_tokens"]
    assert cut["timings"]["predicted_n"] == cut["usage"]["completion_tokens"]
    assert streamed(client, max_tokens=MAX_TOKENS, stop=stop) == (before, ["stop"])


@pytest.mark.parametrize("max_tokens", [2, 5, 13])
def test_max_tokens_holds_when_the_suffix_index_could_draft_past_it(
    suffix_server: Server, answer: str, max_tokens: int
) -> None:
    drafted = ask(suffix_server, AUTO, max_tokens=max_tokens)
    plain = ask(suffix_server, PLAIN, max_tokens=max_tokens)
    assert content(drafted) == content(plain)
    assert answer.startswith(content(drafted))
    assert drafted["usage"]["completion_tokens"] == max_tokens
    assert drafted["timings"]["predicted_n"] == max_tokens
    assert drafted["choices"][0]["finish_reason"] == "length"
    # The first token comes from the prompt's pass, and a round's own token needs a row: the
    # drafts stopped short of the budget, and were kept.
    assert drafted["speculation"]["drafted"] <= max(0, max_tokens - 2)
    assert (drafted["speculation"]["accepted"] > 0) is (max_tokens > 2)


def test_a_seeded_reply_with_penalties_repeats_and_is_plain_decodings(
    suffix_server: Server,
) -> None:
    sampling = {
        "temperature": 1.0,
        "seed": 7,
        "repeat_penalty": 1.1,
        "presence_penalty": 0.4,
        "frequency_penalty": 0.3,
        "logit_bias": {"279": 1.5, "198": -2},
        "max_tokens": MAX_TOKENS,
        "logprobs": True,
        "top_logprobs": 3,
    }
    plain = ask(suffix_server, PLAIN, **sampling)
    again = [ask(suffix_server, AUTO, **sampling) for _ in range(2)]
    for answer in again:
        assert content(answer) == content(plain)
        assert answer["choices"][0]["logprobs"] == plain["choices"][0]["logprobs"]
    # The repeats were drafted from the reply before them.
    assert again[-1]["speculation"]["accepted"] > 0


def test_json_mode_drafted_by_the_suffix_index_is_the_plain_object(suffix_server: Server) -> None:
    fields = {"max_tokens": MAX_TOKENS, "response_format": {"type": "json_object"}}
    replies = [content(ask(suffix_server, n_max, **fields)) for n_max in (PLAIN, AUTO, AUTO)]
    assert replies[0] == replies[1] == replies[2]
    assert isinstance(json.loads(replies[0]), dict)
