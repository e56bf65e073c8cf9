"""The runtime keeps earlier conversations' cache states for its target only, and wipes them
with the chat history."""

from __future__ import annotations

from typing import Any

from app.engine.runtime import DRAFT, Runtime
from app.llama.config import DEFAULT_PROMPT_CACHE_MIB, ModelConfig


def _config(path: Any) -> ModelConfig:
    return ModelConfig(str(path), n_ctx=512, n_threads=1)


def test_a_draft_keeps_no_saved_states_whatever_its_settings_say(demo_models: Any) -> None:
    runtime = Runtime()
    try:
        runtime.load_target(_config(demo_models.q4_0))
        runtime.load_draft(_config(demo_models.q2_k))
        assert runtime.target is not None
        assert runtime.target.config.prompt_cache_mib == DEFAULT_PROMPT_CACHE_MIB
        draft = runtime.draft_config(DRAFT)
        assert draft is not None and draft.prompt_cache_mib == 0
    finally:
        runtime.close()


def test_forgetting_the_history_forgets_saved_conversations(demo_models: Any) -> None:
    runtime = Runtime()
    try:
        runtime.load_target(_config(demo_models.q4_0))
        target = runtime.target
        assert target is not None
        first = [target.bos_id, *range(1000, 1100)]
        target.feed(first, 1)
        target.feed([*first, 7], 1)  # a plain step settles the conversation's tokens
        target.feed([target.bos_id, *range(3000, 3100)], 1)
        assert len(target.prompt_cache) == 1
        assert runtime.memory().target_saved == target.prompt_cache.bytes_used > 0
        runtime.forget_history()
        assert (len(target.prompt_cache), target.prompt_cache.bytes_used) == (0, 0)
        assert runtime.memory().target_saved == 0
    finally:
        runtime.close()
