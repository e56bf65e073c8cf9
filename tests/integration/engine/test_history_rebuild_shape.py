"""A past-chats index rebuilt from the stored chats holds what the index as written holds: each
reply after its question's prompt, turn markers included, so a question asked again in a new
chat drafts its old answer from the answer's first token either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.engine.history_corpus import HistoryCorpus
from app.engine.past_chats import stored_chats
from app.engine.runtime import Runtime
from app.engine.suffix_cursor import longest_match
from app.llama.config import ModelConfig
from app.store import ConversationStore

pytestmark = pytest.mark.model

QUESTION = "Explain photosynthesis to a ten year old in four sentences."
ANSWER = "Plants make their own food from sunlight, water and air. Leaves catch the light."


def _drafts(history: HistoryCorpus, prompt: list[int], n: int = 6) -> tuple[int, ...]:
    branches = history.index.continuations(longest_match(history.index, prompt), n)
    return branches[0].tokens if branches else ()


def test_a_rebuilt_index_drafts_a_question_asked_again_from_its_first_token(
    tmp_path: Path, demo_models: Any
) -> None:
    database = tmp_path / "chats.sqlite3"
    store = ConversationStore(database)
    chat = store.create_conversation()
    store.add_message(chat, "user", QUESTION)
    store.add_message(chat, "assistant", ANSWER)
    store.add_message(chat, "user", "And in one sentence?")  # unanswered: never a document
    store.close()

    runtime = Runtime(
        history_dir=tmp_path, history_source=lambda tokens: stored_chats(database, tokens)
    )
    try:
        runtime.load_target(ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=2))
        history = runtime.history
        assert history is not None and history.documents == 1  # rebuilt: no file yet
        assert runtime.target is not None
        answer = runtime.target.tokenize(ANSWER, add_special=False)
        asked_again = runtime.chat_prompt([{"role": "user", "content": QUESTION}])
        assert _drafts(history, asked_again) == tuple(answer[:6])

        # The same exchange as the index writes it after a reply: no second document.
        runtime.remember(asked_again, answer)
        assert history.documents == 1
    finally:
        runtime.close()
