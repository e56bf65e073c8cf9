"""Small helpers for driving the real engine in tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event, FinishEvent
from app.engine.gamma import OFF
from app.engine.loop import SpeculativeEngine
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from models.compat import check_draft_file


@contextmanager
def loaded_runtime(
    target: ModelConfig, draft: ModelConfig | None = None, *, suffix: bool = True
) -> Iterator[Runtime]:
    """A Runtime with the target (and the draft: with the suffix index unless `suffix` is
    False) loaded, closed however the block ends."""
    runtime = Runtime(vet_draft=check_draft_file, suffix_joins_models=suffix)
    try:
        runtime.load_target(target)
        if draft is not None:
            runtime.load_draft(draft)
        yield runtime
    finally:
        runtime.close()


def run_to_end(
    engine: SpeculativeEngine,
    prompt_ids: Sequence[int],
    config: GenerationConfig,
    *,
    speculative: bool = True,
    control: GenerationControl | None = None,
) -> tuple[GenerationResult, list[Event]]:
    # speculative=False is the same settings at γ off: plain decoding with the drafter loaded.
    plain = replace(config, gamma=OFF)
    events = list(engine.generate(prompt_ids, config if speculative else plain, control))
    last = events[-1]
    assert isinstance(last, FinishEvent)
    return last.result, events


def engine_of(runtime: Runtime) -> SpeculativeEngine:
    """The loaded runtime's engine (tests that drive it directly)."""
    assert runtime.engine is not None
    return runtime.engine
