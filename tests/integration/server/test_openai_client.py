"""The real `openai` client against a real server: exact greedy answers, streamed or not, and
the speculation figures each answer carries."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from tests.integration.server.conftest import API_KEY, GAMMA, MAX_TOKENS, Server

pytestmark = pytest.mark.network

HELLO = "Say hello."
PLANETS = "Name three planets."


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def ask(client: openai.OpenAI, prompt: str, **extra: Any) -> dict[str, Any]:
    completion = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": prompt}],
        temperature=0,
        max_tokens=MAX_TOKENS,
        extra_body=extra or None,
    )
    return completion.to_dict()


def test_greedy_answer_equals_generate(client: openai.OpenAI, reference: Any) -> None:
    body = ask(client, HELLO)
    choice = body["choices"][0]
    assert choice["message"]["content"] == reference(HELLO)
    timings, speculation = body["timings"], body["speculation"]
    assert timings["draft_n"] > 0
    assert 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
    assert timings["predicted_n"] == body["usage"]["completion_tokens"] > 0
    assert speculation["mode"] == "hybrid"  # the draft model drafts beside the suffix index
    assert speculation["n_max"] == GAMMA
    assert speculation["drafted"] == timings["draft_n"]
    assert len(speculation["per_position_acceptance"]) == GAMMA
    assert speculation["tokens_per_round"] > 1.0


def test_streamed_answer_equals_generate(client: openai.OpenAI, reference: Any) -> None:
    stream = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": HELLO}],
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk.to_dict() for chunk in stream]
    *replies, finish, last = chunks
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in replies)
    assert text == reference(HELLO)
    assert finish["choices"][0]["finish_reason"] in {"stop", "length"}
    # OpenAI's shape: usage comes in a last chunk of its own, with no choices.
    assert last["choices"] == []
    assert last["timings"]["draft_n"] > 0
    assert last["speculation"]["mode"] == "hybrid"
    assert last["usage"]["completion_tokens"] == last["timings"]["predicted_n"]
    assert all("timings" not in c for c in chunks[:-1])


def test_speculation_off_per_request_gives_the_same_text(
    client: openai.OpenAI, reference: Any
) -> None:
    body = ask(client, PLANETS, speculative={"n_max": 0})
    assert body["choices"][0]["message"]["content"] == reference(PLANETS)
    assert body["timings"]["draft_n"] == 0
    assert body["speculation"]["mode"] == "plain"


def test_four_clients_at_once_each_get_their_own_answer(
    client: openai.OpenAI, reference: Any
) -> None:
    # Two prompts interleaved, under four speculation settings: replies must not mix and
    # exact mode must keep every setting on the plain greedy path.
    asks = [(HELLO, 4), (PLANETS, "auto"), (HELLO, 0), (PLANETS, 2)]
    with ThreadPoolExecutor(len(asks)) as pool:
        bodies = list(pool.map(lambda a: ask(client, a[0], speculative={"n_max": a[1]}), asks))
    for (prompt, n_max), body in zip(asks, bodies, strict=True):
        assert body["choices"][0]["message"]["content"] == reference(prompt), n_max
        assert body["speculation"]["n_max"] == n_max
        assert (body["timings"]["draft_n"] == 0) == (n_max == 0)


def test_a_continued_conversation_reuses_the_cached_prefix(client: openai.OpenAI) -> None:
    first = ask(client, PLANETS)
    reply = first["choices"][0]["message"]["content"]
    follow_up = client.chat.completions.create(
        model="any",
        messages=[
            {"role": "user", "content": PLANETS},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "And one more?"},
        ],
        temperature=0,
        max_tokens=8,
    ).to_dict()
    timings = follow_up["timings"]
    # The whole first exchange up to the reply is already in the target's cache.
    assert timings["cache_n"] >= first["usage"]["prompt_tokens"]
    assert timings["prompt_n"] == follow_up["usage"]["prompt_tokens"] - timings["cache_n"]


def test_text_completion_equals_generate_without_chat(
    client: openai.OpenAI, reference: Any
) -> None:
    prompt = "The capital of France is"
    completion = client.completions.create(
        model="any", prompt=prompt, temperature=0, max_tokens=16
    ).to_dict()
    assert completion["choices"][0]["text"] == reference(prompt, False, 16)
    assert completion["timings"]["predicted_n"] == completion["usage"]["completion_tokens"]


def test_stop_string_cuts_the_reply_before_it(client: openai.OpenAI, reference: Any) -> None:
    full = reference(HELLO)
    words = full.split()
    stop = words[len(words) // 2]
    expected = full[: full.index(stop)]
    body = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": HELLO}],
        temperature=0,
        max_tokens=MAX_TOKENS,
        stop=[stop],
    ).to_dict()
    assert body["choices"][0]["message"]["content"] == expected
    assert body["choices"][0]["finish_reason"] == "stop"
    streamed = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": HELLO}],
        temperature=0,
        max_tokens=MAX_TOKENS,
        stop=stop,
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == expected


def test_models_lists_the_target(client: openai.OpenAI) -> None:
    models = [m.id for m in client.models.list()]
    assert models == ["SmolLM2-135M-Instruct.F32"]


def test_seeded_sampling_is_reproducible(client: openai.OpenAI) -> None:
    """A seed repeats a reply whose drafts are certain or absent. A sampled draft model's
    rounds depend on what the server learnt from earlier requests (γ, the past replies), so
    with one the same seed may give another reply of the same distribution."""

    def sample(seed: int) -> str:
        return (
            client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": "Write a word."}],
                temperature=1.0,
                top_p=0.95,
                seed=seed,
                max_tokens=12,
                extra_body={"speculative": {"n_max": 0}},
            )
            .choices[0]
            .message.content
            or ""
        )

    first = sample(7)
    assert first and sample(7) == first
