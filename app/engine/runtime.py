"""The engine's front door for the CLI, the benchmark and the window's worker thread.

Owns at most one target and one drafter, frees the old model before loading a new one (two
copies of a large target would not fit in VRAM), vets a draft against the target before paying
for its load, and turns chat messages into prompt ids with the target's own template.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.chat_prompt import chat_prompt_ids
from app.engine.chat_template import ChatMessage
from app.engine.config import DraftMode, GenerationConfig, ModelConfig
from app.engine.control import GenerationControl
from app.engine.drafters import Drafter, ModelDrafter, PromptLookupDrafter
from app.engine.events import Event
from app.engine.loop import Clock, SpeculativeEngine
from app.errors import InvalidSettingError
from app.llama.model import LlamaModel, LoadProgress, ModelFacts

NGRAM = "ngram"


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    """Bytes held by each model, so the draft's own cost in memory is visible."""

    target_weights: int
    target_kv: int
    draft_weights: int
    draft_kv: int
    target_gpu_layers: int
    draft_gpu_layers: int

    @property
    def total(self) -> int:
        return self.target_weights + self.target_kv + self.draft_weights + self.draft_kv


DraftVetter = Callable[[Path, Path], None]
"""Raises DraftIncompatibleError unless a draft file (first) suits a target file (second).

Injected by the composition roots (the CLI, the window) because reading GGUF headers is the
model library's job, and the engine must not import the library."""


class Runtime:
    def __init__(
        self, *, clock: Clock = time.perf_counter, vet_draft: DraftVetter | None = None
    ) -> None:
        self._clock = clock
        self._vet_draft = vet_draft
        self.target: LlamaModel | None = None
        self.drafter: Drafter | None = None
        self.engine: SpeculativeEngine | None = None
        self._target_facts: ModelFacts | None = None
        self._draft_facts: ModelFacts | None = None

    # -- loading ------------------------------------------------------------------------------

    def load_target(self, config: ModelConfig, progress: LoadProgress | None = None) -> ModelFacts:
        self.unload()
        self.target = LlamaModel(config, progress=progress)
        self._target_facts = self.target.facts()
        self.engine = SpeculativeEngine(self.target, clock=self._clock)
        return self._target_facts

    def load_draft(
        self,
        config: ModelConfig,
        progress: LoadProgress | None = None,
        *,
        vetted: bool = False,
    ) -> ModelFacts:
        """Load a draft model for the current target; refuses an incompatible one in words.

        vetted=True skips the header check for callers that already vetted the file
        elsewhere (the window vets drafts in a helper process so the parse never holds the
        GIL of the thread that feeds the event loop).
        """
        target = self._require_target()
        if not vetted:
            self.check_draft(Path(config.path))
        self.clear_draft()
        # The draft never needs more context than the target; a smaller one saves KV memory.
        draft_config = replace(config, n_ctx=min(config.n_ctx, target.n_ctx))
        model = LlamaModel(draft_config, progress=progress)
        self._draft_facts = model.facts()
        self._set_drafter(ModelDrafter(model, target.n_vocab, clock=self._clock))
        return self._draft_facts

    def check_draft(self, draft: Path) -> None:
        """Refuse, in words, a draft file the loaded target cannot use; reads headers only."""
        target = self._require_target()
        if self._vet_draft is not None:
            self._vet_draft(draft, target.path)

    def use_prompt_lookup(self) -> None:
        self._require_target()
        self.clear_draft()
        self._set_drafter(PromptLookupDrafter(clock=self._clock))

    def clear_draft(self) -> None:
        if self.drafter is not None:
            self.drafter.close()
        self.drafter = None
        self._draft_facts = None
        if self.engine is not None:
            self.engine.set_drafter(None)

    def unload(self) -> None:
        self.clear_draft()
        if self.target is not None:
            self.target.close()
        self.target = None
        self.engine = None
        self._target_facts = None

    def _set_drafter(self, drafter: Drafter) -> None:
        self.drafter = drafter
        assert self.engine is not None
        self.engine.set_drafter(drafter)

    def _require_target(self) -> LlamaModel:
        if self.target is None:
            raise InvalidSettingError("no target model is loaded")
        return self.target

    # -- prompts ------------------------------------------------------------------------------

    def chat_prompt(
        self, messages: Sequence[ChatMessage], control: GenerationControl | None = None
    ) -> list[int]:
        """Prompt ids from the target's own template; Stop on `control` ends a slow render."""
        target = self._require_target()
        return chat_prompt_ids(
            target,
            target.meta("tokenizer.chat_template"),
            messages,
            bos_token=target.token_text(target.bos_id) if target.bos_id >= 0 else "",
            eos_token=target.token_text(target.eos_id) if target.eos_id >= 0 else "",
            should_stop=None if control is None else (lambda: control.stop_requested),
        )

    def text_prompt(self, text: str) -> list[int]:
        return self._require_target().tokenize(text, add_special=True, parse_special=False)

    # -- generating ---------------------------------------------------------------------------

    @property
    def mode(self) -> DraftMode:
        return self.drafter.mode if self.drafter is not None else "plain"

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
        *,
        speculative: bool = True,
    ) -> Iterator[Event]:
        if self.engine is None:
            raise InvalidSettingError("no target model is loaded")
        return self.engine.generate(prompt_ids, config, control, speculative=speculative)

    def memory(self) -> MemoryUsage:
        t, d = self._target_facts, self._draft_facts
        return MemoryUsage(
            target_weights=t.weights_bytes if t else 0,
            target_kv=t.kv_cache_bytes if t else 0,
            draft_weights=d.weights_bytes if d else 0,
            draft_kv=d.kv_cache_bytes if d else 0,
            target_gpu_layers=t.n_gpu_layers if t else 0,
            draft_gpu_layers=d.n_gpu_layers if d else 0,
        )

    def close(self) -> None:
        self.unload()
