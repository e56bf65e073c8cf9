"""A reply the server stops before it ends (it is shutting down) never reads as whole: not
streamed, it is a 503 `cancelled` with no usage; streamed, the text so far is followed by an
error event, never by a finish_reason of "length" or "stop"."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, RoundEvent
from app.engine.job_queue import RuntimeOwner
from app.server.timings import finish_reason
from tests.unit.server.test_reply_accounting import RoundsRuntime, post


class ShutdownMidReply(RoundsRuntime):
    """Its owner stops accepting (as a server shutting down does) after the first round."""

    def __init__(self) -> None:
        super().__init__()
        self.owner: RuntimeOwner | None = None

    def generate(
        self, ids: Sequence[int], config: GenerationConfig, control: GenerationControl
    ) -> Iterator[Event]:
        for event in super().generate(ids, config, control):
            yield event
            if isinstance(event, RoundEvent) and self.owner is not None:
                self.owner.stop_accepting()


@pytest.fixture
def owner() -> Iterator[RuntimeOwner]:
    runtime = ShutdownMidReply()
    owner = RuntimeOwner(runtime)  # type: ignore[arg-type]
    runtime.owner = owner
    yield owner
    owner.close()


BODY = {"messages": [{"role": "user", "content": "Count."}], "max_tokens": 40}


def test_a_reply_cut_by_the_server_stopping_is_a_503_cancelled_not_a_whole_reply(
    owner: RuntimeOwner,
) -> None:
    status, raw = post(owner, "/v1/chat/completions", BODY)
    body = json.loads(raw)
    assert status == 503, body
    assert body["error"]["code"] == "cancelled"
    assert "usage" not in body and "choices" not in body


def test_a_streamed_reply_cut_by_the_server_stopping_ends_with_an_error_event(
    owner: RuntimeOwner,
) -> None:
    status, raw = post(owner, "/v1/chat/completions", {**BODY, "stream": True})
    assert status == 200  # the stream had begun
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["error"]["code"] == "cancelled"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text  # what was written before the cut went out
    reasons = {c["choices"][0]["finish_reason"] for c in chunks[:-1]}
    assert reasons == {None}


def test_a_cancelled_reply_has_no_finish_reason_of_its_own() -> None:
    assert finish_reason("length", False) == finish_reason("context", False) == "length"
    assert finish_reason("cancelled", True) == "stop"  # cut by its own stop string
    with pytest.raises(ValueError, match="cancelled"):
        finish_reason("cancelled", False)
