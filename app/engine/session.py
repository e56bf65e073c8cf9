"""EngineSession: what every front end drives, whether the models run here or in a child.

`Runtime` (app/engine/runtime.py) holds the models in this process; `IsolatedRuntime`
(app/engine/isolated.py) holds them in a child process for models on RPC workers, whose
failures would otherwise end this one. Both implement this Protocol, and mypy checks that they
do (the assignments at the end of app/engine/isolated.py); the job queue, the CLI and the
window hold an EngineSession and never ask which one it is, except for what only the
in-process Runtime can offer (several drafts at once, the past-chats index, the target's
saved conversation states).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import Event
from app.engine.tool_calls import ToolDialect, ToolOffer
from app.llama.config import ModelConfig
from app.llama.facts import MemoryUsage, ModelFacts
from app.llama.model import LoadProgress
from app.metrics.rounds import DraftMode


class EngineSession(Protocol):
    """One target and at most one draft at a time: load, prompt, generate, free."""

    @property
    def target_facts(self) -> ModelFacts | None:
        """The loaded target's facts; None when no target is loaded (or its process died)."""
        ...

    @property
    def mode(self) -> DraftMode:
        """How the next reply drafts: "plain" with no draft."""
        ...

    @property
    def prompt_cached(self) -> int:
        """Tokens the target's cache held when the last reply's prompt pass began, live or
        restored from a saved conversation (LlamaModel.reused); read once it has begun."""
        ...

    def load_target(
        self, config: ModelConfig, progress: LoadProgress | None = None
    ) -> ModelFacts: ...

    def load_draft(
        self,
        config: ModelConfig,
        progress: LoadProgress | None = None,
        *,
        vetted: bool = False,
        joined: bool | None = None,
    ) -> ModelFacts:
        """The only draft, selected; `joined`: drafting together with the suffix index (None:
        the runtime's default)."""
        ...

    def check_draft(self, draft: Path) -> None:
        """Refuse, in words, a draft file the loaded target cannot use."""
        ...

    def use_suffix_index(self) -> None: ...

    def clear_draft(self) -> None: ...

    def unload(self) -> None: ...

    def chat_prompt(
        self,
        messages: Sequence[ChatMessage],
        control: GenerationControl | None = None,
        tools: ToolOffer | None = None,
    ) -> list[int]: ...

    def tool_dialect(self) -> ToolDialect: ...

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:
        """A raw prompt's ids; parse_special reads special-token text as those tokens."""
        ...

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
    ) -> Iterator[Event]: ...

    def memory(self) -> MemoryUsage: ...

    def close(self) -> None: ...
