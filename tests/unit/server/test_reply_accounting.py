"""What a reply reports, through the whole HTTP app on a scripted engine: a stop string ends the
engine at its round and the reply is counted up to it (usage, timings, logprobs, /health);
`stream_options.include_usage` ends a stream as OpenAI's does; engine refusals name their field.

The engine is scripted (one round emits several tokens, as a speculative round does), so each
case is certain; tests/integration/server/test_reply_accounting.py runs the real one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent, RoundEvent, TokenEvent
from app.engine.job_queue import RuntimeOwner
from app.engine.logprobs import TokenChoice, TokenLogprob
from app.engine.result import FinishReason, GenerationResult
from app.llama.facts import NO_MEMORY, MemoryUsage, ModelFacts
from app.metrics.rounds import RoundRecord
from app.metrics.summary import summarize
from app.server.app import ServerSettings, create_app
from app.server.schemas import Defaults
from tests.helpers.asgi import asgi_post

# "1. 1\n2. 2\n..." a token at a time: four tokens per line.
PIECES = [piece for n in range(1, 11) for piece in (str(n), ".", f" {n}", "\n")]
ROUND = 8  # tokens per engine round
GENERATION_S = 0.5
N_VOCAB = 100
STOP = "4. 4\n5"
BEFORE_STOP = "1. 1\n2. 2\n3. 3\n"
# The stop string is completed by token 17 ("5"): llama-server counts the reply through it.
THROUGH_STOP = 17


class RoundsRuntime:
    """Emits PIECES, ROUND tokens per round, reading the stop flag between rounds."""

    mode = "plain"
    prompt_cached = 0

    def __init__(self) -> None:
        self.target_facts = ModelFacts("fake.gguf", N_VOCAB, 512, 512, 1, 8, 1, 1, 10, 0, 0, 0)
        self.rounds_run = 0
        self.text_prompts: list[tuple[str, bool]] = []

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:
        self.text_prompts.append((text, parse_special))
        return [1, 2, 3]

    def chat_prompt(self, _messages: Sequence[Any], _control: object = None, **_: Any) -> list[int]:
        return [1, 2, 3, 4]

    def generate(
        self, ids: Sequence[int], config: GenerationConfig, control: GenerationControl
    ) -> Iterator[Event]:
        config.validate()
        rounds: list[RoundRecord] = []
        reply: list[int] = []
        finish: FinishReason = "length"
        while len(reply) < config.max_tokens:
            if control.stop_requested:
                finish = "cancelled"
                break
            self.rounds_run += 1
            emitted = min(ROUND, config.max_tokens - len(reply))
            for _ in range(emitted):
                i = len(reply)
                reply.append(i)
                chosen = TokenChoice(i, -0.5, PIECES[i].encode())
                yield TokenEvent(i, PIECES[i], i % ROUND != 0, i, logprob=TokenLogprob(chosen, ()))
            rounds.append(
                RoundRecord(len(rounds), "draft", ROUND, ROUND, ROUND - 1, emitted, 0.0, 0.01, 1)
            )
            yield RoundEvent(rounds[-1])
        stats = summarize(
            rounds, prompt_tokens=len(ids), generated_tokens=len(reply),
            prompt_s=0.1, generation_s=GENERATION_S, ttft_s=0.1, plain_step_s=None,
        )  # fmt: skip
        text = "".join(PIECES[i] for i in reply)
        mask = tuple(True for _ in reply)
        yield FinishEvent(GenerationResult(text, reply, finish, "draft", stats, (), mask))

    def memory(self) -> MemoryUsage:
        return NO_MEMORY

    def close(self) -> None:
        pass


@pytest.fixture
def runtime() -> RoundsRuntime:
    return RoundsRuntime()


@pytest.fixture
def owner(runtime: RoundsRuntime) -> Iterator[RuntimeOwner]:
    owner = RuntimeOwner(runtime)  # type: ignore[arg-type]
    yield owner
    owner.close()


def post(owner: RuntimeOwner, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """One POST through the ASGI app, as uvicorn would make it; the status and the body."""
    settings = ServerSettings(Defaults(GenerationConfig(max_tokens=40), 4), "fake", 512)
    app = create_app(owner, settings)

    async def call() -> tuple[int, bytes]:
        scope, receive, send, sent = asgi_post(path, body)
        await app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        return status, b"".join(
            m.get("body", b"") for m in sent if m["type"] != "http.response.start"
        )

    return asyncio.run(call())


def chat(owner: RuntimeOwner, **fields: Any) -> tuple[int, dict[str, Any]]:
    body = {"messages": [{"role": "user", "content": "Count."}], **fields}
    status, raw = post(owner, "/v1/chat/completions", body)
    return status, json.loads(raw)


def streamed(owner: RuntimeOwner, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    status, raw = post(owner, path, {**body, "stream": True})
    assert status == 200
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def served(owner: RuntimeOwner) -> tuple[int, int]:
    """Jobs served and cancelled, once the owner's thread has ended: it counts a job just after
    the job's last event, which may be after its client has the answer."""
    owner.close()
    health = owner.health()
    return health["served"], health["cancelled"]


# -- stop strings ---------------------------------------------------------------------------


def test_a_stop_string_ends_the_engine_at_its_round_and_the_reply_counts_as_served(
    owner: RuntimeOwner, runtime: RoundsRuntime
) -> None:
    status, body = chat(owner, stop=STOP)
    assert status == 200
    assert body["choices"][0]["message"]["content"] == BEFORE_STOP
    assert body["choices"][0]["finish_reason"] == "stop"
    # Token 17 is the third round's first: no fourth round runs.
    assert runtime.rounds_run == 3
    assert served(owner) == (1, 0)


def test_usage_and_timings_count_the_tokens_up_to_the_one_completing_the_stop(
    owner: RuntimeOwner,
) -> None:
    _status, body = chat(owner, stop=STOP)
    assert body["usage"]["completion_tokens"] == THROUGH_STOP
    timings = body["timings"]
    assert timings["predicted_n"] == THROUGH_STOP
    assert timings["predicted_per_second"] == pytest.approx((THROUGH_STOP - 1) / GENERATION_S)


def test_logprobs_cover_the_returned_text_only(owner: RuntimeOwner) -> None:
    _status, body = chat(owner, stop=STOP, logprobs=True)
    entries = body["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == BEFORE_STOP
    legacy_status, raw = post(
        owner, "/v1/completions", {"prompt": "1.", "stop": STOP, "logprobs": 0}
    )
    assert legacy_status == 200
    legacy = json.loads(raw)["choices"][0]
    assert "".join(legacy["logprobs"]["tokens"]) == legacy["text"] == BEFORE_STOP


def test_a_streamed_reply_counts_the_same_and_streams_its_tokens_logprobs_with_them(
    owner: RuntimeOwner,
) -> None:
    body = {"messages": [{"role": "user", "content": "Count."}], "stop": STOP, "logprobs": True}
    chunks = streamed(owner, "/v1/chat/completions", body)
    texts = [c["choices"][0]["delta"].get("content", "") for c in chunks[1:-1]]
    tokens = [
        "".join(e["token"] for e in c["choices"][0]["logprobs"]["content"]) for c in chunks[1:-1]
    ]
    # A token's log probability goes out with its text; "4. 4\n", held back while it may
    # begin the stop string, never goes out.
    assert tokens == texts
    assert "".join(texts) == BEFORE_STOP
    assert chunks[-1]["timings"]["predicted_n"] == THROUGH_STOP
    assert served(owner) == (1, 0)


# -- the last chunks of a stream --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Count."}]}),
        ("/v1/completions", {"prompt": "1."}),
    ],
)
def test_include_usage_ends_the_stream_with_a_usage_chunk_without_choices(
    owner: RuntimeOwner, path: str, body: dict[str, Any]
) -> None:
    chunks = streamed(
        owner, path, {**body, "max_tokens": 12, "stream_options": {"include_usage": True}}
    )
    *earlier, finish, last = chunks
    assert last["choices"] == []
    usage = last["usage"]
    assert usage["completion_tokens"] == 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + 12
    assert last["timings"]["predicted_n"] == 12 and "speculation" in last
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["usage"] is None and "timings" not in finish
    assert all(c["usage"] is None and "timings" not in c for c in earlier)
    assert {c["id"] for c in chunks} == {last["id"]}


# -- prompts ----------------------------------------------------------------------------------


def test_a_raw_prompt_reads_special_token_text_and_a_chat_never_asks_to(
    owner: RuntimeOwner, runtime: RoundsRuntime
) -> None:
    prompt = "<|im_start|>user\nHi<|im_end|>\n"
    status, _raw = post(owner, "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    assert status == 200
    chat(owner, max_tokens=1)
    assert runtime.text_prompts == [(prompt, True)]


# -- refusals name their field ----------------------------------------------------------------


def test_a_logit_bias_on_a_token_outside_the_vocabulary_is_a_400_naming_it(
    owner: RuntimeOwner,
) -> None:
    for token in (str(N_VOCAB), "99999999999999999999999"):
        status, body = chat(owner, logit_bias={token: 1})
        assert status == 400, body
        assert body["error"]["param"] == "logit_bias"
        assert body["error"]["type"] == "invalid_request_error"
    status, _body = chat(owner, logit_bias={str(N_VOCAB - 1): 1}, max_tokens=1)
    assert status == 200


@pytest.mark.parametrize("key", ["\u00b2", "\u0661", "9" * 5000])
def test_a_logit_bias_key_that_int_cannot_read_is_a_400_naming_it(
    owner: RuntimeOwner, key: str
) -> None:
    # str.isdigit() holds for a superscript two and an Arabic-Indic one; int() refuses both,
    # and any string of more than 4300 digits.
    status, body = chat(owner, logit_bias={key: 1})
    assert status == 400, body
    assert body["error"]["param"] == "logit_bias"


# JSON reads a 401-digit integer literal as a Python int, too large for a float.
HUGE = 10**400


def _integer_schema(bound: str, value: int) -> dict[str, Any]:
    """An integer from 0 to `value`, or from `value` to 0, `bound` saying which."""
    other = "minimum" if bound.lower().endswith("maximum") else "maximum"
    return {"type": "integer", other: 0, bound: value}


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"temperature": HUGE}, "temperature"),
        ({"top_p": HUGE}, "top_p"),
        ({"min_p": HUGE}, "min_p"),
        ({"repeat_penalty": HUGE}, "repeat_penalty"),
        ({"presence_penalty": -HUGE}, "presence_penalty"),
        ({"frequency_penalty": HUGE}, "frequency_penalty"),
        ({"speculative": {"p_min": HUGE}}, "speculative.p_min"),
        ({"logit_bias": {"5": HUGE}}, "logit_bias"),
        ({"logit_bias": {"5": -HUGE}}, "logit_bias"),
        ({"seed": HUGE}, "seed"),
        ({"max_tokens": HUGE}, "max_tokens"),
        ({"max_completion_tokens": HUGE}, "max_completion_tokens"),
        ({"n": HUGE}, "n"),
        ({"logprobs": True, "top_logprobs": HUGE}, "top_logprobs"),
        ({"speculative": {"n_max": HUGE}}, "speculative.n_max"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "n", "schema": _integer_schema("maximum", HUGE)},
                }
            },
            "response_format",
        ),
        ({"json_schema": _integer_schema("minimum", -HUGE)}, "json_schema"),
        (
            {
                "tool_choice": "required",
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "pick",
                            "parameters": {
                                "type": "object",
                                "properties": {"n": _integer_schema("exclusiveMaximum", HUGE)},
                            },
                        },
                    }
                ],
            },
            "tools",
        ),
    ],
)
def test_an_integer_too_large_for_a_float_is_a_400_naming_its_field(
    owner: RuntimeOwner, fields: dict[str, Any], param: str
) -> None:
    status, body = chat(owner, **fields)
    assert status == 400, body
    assert (body["error"]["param"], body["error"]["code"]) == (param, "invalid_value")
    assert body["error"]["type"] == "invalid_request_error"
    # One line a person reads, not the number's 401 digits.
    assert len(body["error"]["message"]) < 200, body["error"]["message"]
