"""`logprobs` / `top_logprobs` through a real `specchat serve` and the real `openai` client:
the figures are the target's, so speculating changes neither the reply nor its log
probabilities, streamed or not, on both endpoints."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.integration.server.conftest import API_KEY, MAX_TOKENS, Server

pytestmark = pytest.mark.network

PROMPT = "Name three colours of the rainbow."
TOP = 3
# Plain steps and verification run the same kernels under --exact; what may still differ is
# the order of float32 sums in the softmax.
TOLERANCE = 1e-4
Entry = dict[str, Any]


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def ask(client: openai.OpenAI, *, stream: bool, n_max: int | None) -> tuple[str, list[Entry]]:
    """The reply's text and its logprobs.content entries."""
    extra = {"speculative": {"n_max": n_max}} if n_max is not None else None
    common: dict[str, Any] = {
        "model": "any",
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "logprobs": True,
        "top_logprobs": TOP,
        "extra_body": extra,
    }
    if not stream:
        choice = client.chat.completions.create(**common).choices[0]
        assert choice.logprobs is not None and choice.logprobs.content is not None
        content = choice.message.content or ""
        return content, [e.model_dump() for e in choice.logprobs.content]
    text: list[str] = []
    entries: list[Entry] = []
    for chunk in client.chat.completions.create(**common, stream=True):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text.append(choice.delta.content or "")
        if choice.logprobs is not None and choice.logprobs.content:
            entries.extend(e.model_dump() for e in choice.logprobs.content)
    return "".join(text), entries


@pytest.fixture(scope="module")
def replies(client: openai.OpenAI) -> dict[tuple[bool, str], tuple[str, list[Entry]]]:
    return {
        (stream, name): ask(client, stream=stream, n_max=n_max)
        for stream in (False, True)
        for name, n_max in (("speculative", None), ("plain", 0))
    }


@pytest.mark.parametrize("stream", [False, True])
def test_speculating_changes_neither_the_greedy_reply_nor_its_log_probabilities(
    replies: dict[tuple[bool, str], tuple[str, list[Entry]]], stream: bool
) -> None:
    text, entries = replies[stream, "speculative"]
    plain_text, plain_entries = replies[stream, "plain"]
    assert text and text == plain_text
    assert [e["token"] for e in entries] == [e["token"] for e in plain_entries]
    for ours, theirs in zip(entries, plain_entries, strict=True):
        assert ours["logprob"] == pytest.approx(theirs["logprob"], abs=TOLERANCE)
        assert [t["token"] for t in ours["top_logprobs"]] == [
            t["token"] for t in theirs["top_logprobs"]
        ]
        for a, b in zip(ours["top_logprobs"], theirs["top_logprobs"], strict=True):
            assert a["logprob"] == pytest.approx(b["logprob"], abs=TOLERANCE)


@pytest.mark.parametrize("stream", [False, True])
def test_each_token_of_a_greedy_reply_is_the_most_likely_and_spells_the_reply(
    replies: dict[tuple[bool, str], tuple[str, list[Entry]]], stream: bool
) -> None:
    text, entries = replies[stream, "speculative"]
    assert bytes(b for e in entries for b in e["bytes"]).decode() == text
    for entry in entries:
        tops = entry["top_logprobs"]
        assert len(tops) == TOP
        assert entry["logprob"] == max(t["logprob"] for t in tops)
        assert tops[0]["bytes"] == entry["bytes"]
        assert entry["logprob"] <= 0.0


def test_streamed_and_whole_replies_report_the_same_figures(
    replies: dict[tuple[bool, str], tuple[str, list[Entry]]],
) -> None:
    whole = replies[False, "speculative"][1]
    streamed = replies[True, "speculative"][1]
    assert [e["token"] for e in whole] == [e["token"] for e in streamed]
    for a, b in zip(whole, streamed, strict=True):
        assert a["logprob"] == pytest.approx(b["logprob"], abs=TOLERANCE)


def test_legacy_completions_report_the_chosen_tokens(client: openai.OpenAI) -> None:
    completion = client.completions.create(
        model="any", prompt="The capital of France is", temperature=0, max_tokens=8, logprobs=2
    )
    choice = completion.choices[0]
    assert choice.logprobs is not None
    logprobs = choice.logprobs
    assert "".join(logprobs.tokens or []) == choice.text
    assert logprobs.text_offset == [
        sum(len(t) for t in (logprobs.tokens or [])[:i]) for i in range(len(logprobs.tokens or []))
    ]
    for chosen, token, top in zip(
        logprobs.token_logprobs or [],
        logprobs.tokens or [],
        logprobs.top_logprobs or [],
        strict=True,
    ):
        assert len(top) == 2
        assert chosen == max(top.values()) == top[token]


def test_a_reply_without_logprobs_reports_none(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "hi"}], temperature=0, max_tokens=4
    )
    assert completion.choices[0].logprobs is None


def _cut_inside_a_character(entries: list[Entry]) -> int:
    """A token count whose tokens end partway through a character of the reply."""
    for count in range(1, len(entries)):
        try:
            bytes(b for e in entries[:count] for b in e["bytes"]).decode()
        except UnicodeDecodeError:
            return count
    raise AssertionError("no token of the reply ends inside a character")


def test_a_reply_cut_inside_a_character_streams_every_tokens_log_probability(
    client: openai.OpenAI,
) -> None:
    common: dict[str, Any] = {
        "model": "any",
        "messages": [{"role": "user", "content": "Say hello in Japanese and Chinese, with emoji."}],
        "temperature": 0,
        "logprobs": True,
    }
    whole = client.chat.completions.create(**common, max_tokens=32).choices[0]
    assert whole.logprobs is not None and whole.logprobs.content is not None
    cut = _cut_inside_a_character([e.model_dump() for e in whole.logprobs.content])
    entries: list[Entry] = []
    usage = None
    for chunk in client.chat.completions.create(
        **common, max_tokens=cut, stream=True, stream_options={"include_usage": True}
    ):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.logprobs is not None and choice.logprobs.content:
                entries.extend(e.model_dump() for e in choice.logprobs.content)
    assert usage is not None and usage.completion_tokens == cut
    assert len(entries) == cut  # the last token, a character's first bytes, included
