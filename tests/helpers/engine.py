"""Small helpers for driving the real engine in tests."""

from __future__ import annotations

from collections.abc import Sequence

from app.config import GenerationConfig
from app.control import GenerationControl
from app.engine import SpeculativeEngine
from app.events import Event, FinishEvent
from app.result import GenerationResult


def run_to_end(
    engine: SpeculativeEngine,
    prompt_ids: Sequence[int],
    config: GenerationConfig,
    *,
    speculative: bool = True,
    control: GenerationControl | None = None,
) -> tuple[GenerationResult, list[Event]]:
    events = list(engine.generate(prompt_ids, config, control, speculative=speculative))
    last = events[-1]
    assert isinstance(last, FinishEvent)
    return last.result, events
