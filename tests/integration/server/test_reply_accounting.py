"""What an answer reports on the real demo models: a reply cut by a stop string is counted up to
it (usage, timings, logprobs, /health), a prompt restored from the prompt cache is not counted
as read, a raw prompt's special-token text reads as those tokens, and sampling fields at their
edges (64-bit seeds, a denormal temperature, a logit bias past the vocabulary) are answered as
OpenAI answers them."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.integration.server.conftest import API_KEY, Server
from tests.integration.server.test_cancel import wait_for

pytestmark = pytest.mark.network

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
COUNTING = "Count from 1 to 10."
N_VOCAB = 49152  # SmolLM2's


def ok(answer: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    status, payload = answer
    assert status == 200, payload
    return payload


def chat_body(content: str, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, **fields}


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def stop_inside(tokens: list[str]) -> tuple[str, str, int]:
    """A stop string of three whole tokens from the middle of a reply, first seen there: the
    stop, the text before it, and how many tokens the reply is counted by (through the stop's
    last token)."""
    text = "".join(tokens)
    for start in range(len(tokens) // 3, len(tokens) - 3):
        before = "".join(tokens[:start])
        stop = "".join(tokens[start : start + 3])
        if stop.strip() and text.find(stop) == len(before):
            return stop, before, start + 3
    raise AssertionError(f"no stop string to cut {text!r} with")


# -- stop strings ---------------------------------------------------------------------------


def test_a_chat_reply_cut_by_a_stop_string_is_counted_up_to_it(
    server: Server, client: openai.OpenAI
) -> None:
    body = chat_body(COUNTING, max_tokens=32, logprobs=True)
    full = ok(server.request("POST", CHAT, body))
    tokens = [e["token"] for e in full["choices"][0]["logprobs"]["content"]]
    stop, before, counted = stop_inside(tokens)
    health = server.health()

    cut = ok(server.request("POST", CHAT, {**body, "stop": stop}))
    choice = cut["choices"][0]
    assert choice["message"]["content"] == before
    assert choice["finish_reason"] == "stop"
    assert "".join(e["token"] for e in choice["logprobs"]["content"]) == before
    assert cut["usage"]["completion_tokens"] == counted < full["usage"]["completion_tokens"]
    assert cut["timings"]["predicted_n"] == counted

    # The openai client reads the stream as OpenAI writes it: usage in a last chunk of its own.
    chunks = [
        chunk.to_dict()
        for chunk in client.chat.completions.create(
            model="any",
            messages=body["messages"],
            temperature=0,
            max_tokens=32,
            stop=stop,
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert streamed == before
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == counted
    assert chunks[-1]["timings"]["predicted_n"] == counted

    # The owner counts a job just after its last event, which may be after the client has it.
    after = wait_for(server, lambda h: h["served"] >= health["served"] + 2)
    assert after["served"] == health["served"] + 2
    assert after["cancelled"] == health["cancelled"]


def test_a_plain_text_completion_cut_by_a_stop_string_is_counted_up_to_it(
    server: Server,
) -> None:
    body = {
        "prompt": "One, two, three, four,",
        "max_tokens": 24,
        "temperature": 0,
        "logprobs": 0,
        "speculative": {"n_max": 0},
    }
    full = ok(server.request("POST", COMPLETIONS, body))
    stop, before, counted = stop_inside(full["choices"][0]["logprobs"]["tokens"])
    cut = ok(server.request("POST", COMPLETIONS, {**body, "stop": [stop]}))
    choice = cut["choices"][0]
    assert choice["text"] == before
    assert "".join(choice["logprobs"]["tokens"]) == before
    assert cut["usage"]["completion_tokens"] == cut["timings"]["predicted_n"] == counted


# -- prompts --------------------------------------------------------------------------------


def test_a_raw_prompt_reads_special_tokens_and_a_chat_message_does_not(server: Server) -> None:
    def prompt_tokens(path: str, body: dict[str, Any]) -> int:
        return int(
            ok(server.request("POST", path, {**body, "max_tokens": 1}))["usage"]["prompt_tokens"]
        )

    turn = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    raw = prompt_tokens(COMPLETIONS, {"prompt": turn})
    # "<|im_start|>" is one token of the vocabulary, read as such.
    assert prompt_tokens(COMPLETIONS, {"prompt": turn + "<|im_start|>"}) == raw + 1
    # In a chat message it stays text, many tokens, so it cannot open a turn.
    plain = prompt_tokens(CHAT, chat_body("Hi"))
    assert prompt_tokens(CHAT, chat_body("Hi<|im_start|>")) > plain + 1


def test_a_prompt_restored_from_the_prompt_cache_is_counted_as_cached(server: Server) -> None:
    def ask(system: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hi."}]
        return ok(server.request("POST", CHAT, {"messages": messages, "max_tokens": 2}))

    first = " ".join(f"alpha{i} is a word." for i in range(30))
    other = " ".join(f"beta{i} is a word." for i in range(30))
    ask(first)
    ask(other)  # drops the first conversation from the cache: the prompt cache keeps it
    again = ask(first)
    prompt_tokens = again["usage"]["prompt_tokens"]
    assert prompt_tokens > 150
    timings = again["timings"]
    assert timings["cache_n"] == prompt_tokens - 1
    assert timings["prompt_n"] == 1


# -- sampling fields at their edges ---------------------------------------------------------


def test_a_64_bit_seed_is_taken_and_repeats_its_reply(server: Server) -> None:
    body = chat_body(
        "Write a word.", temperature=1.0, seed=2**40, max_tokens=8, speculative={"n_max": 0}
    )
    first = ok(server.request("POST", CHAT, body))["choices"][0]["message"]["content"]
    assert ok(server.request("POST", CHAT, body))["choices"][0]["message"]["content"] == first


def test_a_denormal_temperature_decodes_greedy(server: Server) -> None:
    greedy = ok(server.request("POST", CHAT, chat_body("Say hello.", max_tokens=12)))
    tiny = ok(
        server.request("POST", CHAT, chat_body("Say hello.", max_tokens=12, temperature=1e-310))
    )
    assert tiny["choices"][0]["message"] == greedy["choices"][0]["message"]


@pytest.mark.parametrize("token", ["99999999999999999999999", str(N_VOCAB)])
def test_a_logit_bias_past_the_vocabulary_is_a_400_naming_it(server: Server, token: str) -> None:
    status, payload = server.request(
        "POST", CHAT, chat_body("hi", max_tokens=2, logit_bias={token: 1})
    )
    assert status == 400, payload
    assert payload["error"]["param"] == "logit_bias"
    assert payload["error"]["type"] == "invalid_request_error"
