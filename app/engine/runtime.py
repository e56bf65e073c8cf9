"""The engine's front door for the CLI, the benchmark and the window's worker thread.

Owns at most one target and the drafts loaded for it, frees the old model before loading a
new one (two copies of a large target would not fit in VRAM), vets a draft against the target
before paying for its load, and turns chat messages into prompt ids with the target's own template.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.chat_prompt import chat_prompt_ids
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, ModelConfig
from app.engine.control import GenerationControl
from app.engine.drafters import Drafter, ModelDrafter, PromptLookupDrafter
from app.engine.events import Event
from app.engine.loop import Clock, SpeculativeEngine
from app.errors import InvalidSettingError
from app.llama.model import LlamaModel, LoadProgress, ModelFacts
from app.metrics.rounds import DraftMode

NGRAM = "ngram"
# The label load_draft gives the one draft of a chat.
DRAFT = "draft"


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


@dataclass(frozen=True, slots=True)
class _Loaded:
    drafter: Drafter
    facts: ModelFacts | None  # None for prompt lookup: no model
    config: ModelConfig | None = None  # how the draft model was loaded, to load it again


DraftVetter = Callable[[Path, Path], None]
"""Raises DraftIncompatibleError unless a draft file (first) suits a target file (second).

Injected by the composition roots (the CLI, the window) because reading GGUF headers is the
model library's job, and the engine must not import the library."""


ModelOpener = Callable[..., LlamaModel]
"""Opens a model file: LlamaModel itself, or a stand-in with its contract in tests."""


class Runtime:
    """At most one target, and drafts registered by label of which one at a time is selected.

    The window and `generate` use one draft (load_draft / use_prompt_lookup / clear_draft);
    the benchmark keeps several and selects one per run (add_draft / select_draft /
    free_draft), so runs of different drafts interleave without reloading anything.
    """

    def __init__(
        self,
        *,
        clock: Clock = time.perf_counter,
        vet_draft: DraftVetter | None = None,
        open_model: ModelOpener = LlamaModel,
    ) -> None:
        self._clock = clock
        self._vet_draft = vet_draft
        self._open_model = open_model
        self.target: LlamaModel | None = None
        self.engine: SpeculativeEngine | None = None
        self._target_facts: ModelFacts | None = None
        self._drafts: dict[str, _Loaded] = {}
        self._selected: str | None = None

    # -- loading ------------------------------------------------------------------------------

    def load_target(self, config: ModelConfig, progress: LoadProgress | None = None) -> ModelFacts:
        self.unload()
        self.target = self._open_model(config, progress=progress)
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
        """Make this draft the only one, selected; refuses an incompatible one in words.

        vetted=True skips the header check for callers that already vetted the file
        elsewhere (the window vets drafts in a helper process so the parse never holds the
        GIL of the thread that feeds the event loop).
        """
        self._require_target()
        if not vetted:
            self.check_draft(Path(config.path))
        self.clear_draft()
        facts = self.add_draft(DRAFT, config, progress, vetted=True)
        self.select_draft(DRAFT)
        return facts

    def use_prompt_lookup(self) -> None:
        self._require_target()
        self.clear_draft()
        self.add_prompt_lookup(NGRAM)
        self.select_draft(NGRAM)

    def clear_draft(self) -> None:
        """Free every draft; the engine decodes plain until another is selected."""
        for label in list(self._drafts):
            self.free_draft(label)

    def add_draft(
        self,
        label: str,
        config: ModelConfig,
        progress: LoadProgress | None = None,
        *,
        vetted: bool = False,
    ) -> ModelFacts:
        """Load a draft model under `label` without selecting it."""
        target = self._require_target()
        self._require_free(label)
        if not vetted:
            self.check_draft(Path(config.path))
        # The draft never needs more context than the target; a smaller one saves KV memory.
        draft_config = replace(config, n_ctx=min(config.n_ctx, target.n_ctx))
        model = self._open_model(draft_config, progress=progress)
        facts = model.facts()
        drafter = ModelDrafter(model, target.n_vocab, label=label, clock=self._clock)
        self._drafts[label] = _Loaded(drafter, facts, draft_config)
        return facts

    def add_prompt_lookup(self, label: str) -> None:
        """Register prompt lookup under `label` (no model, no memory) without selecting it."""
        self._require_target()
        self._require_free(label)
        self._drafts[label] = _Loaded(PromptLookupDrafter(clock=self._clock), None)

    def select_draft(self, label: str | None) -> None:
        """Speculate with the draft registered as `label` from the next reply (None: plain).

        γ auto keeps what it learned per draft: one draft's figures do not describe another's.
        """
        engine = self._require_engine()
        if label is not None and label not in self._drafts:
            raise InvalidSettingError(f"no draft named {label!r} is loaded")
        self._selected = label
        engine.set_drafter(self.drafter)

    def free_draft(self, label: str) -> None:
        """Close one draft and give its memory back; deselects it if it was selected."""
        loaded = self._drafts.pop(label, None)
        if loaded is None:
            return
        if self._selected == label:
            self._selected = None
            if self.engine is not None:
                self.engine.set_drafter(None)
        loaded.drafter.close()

    @property
    def draft_labels(self) -> tuple[str, ...]:
        return tuple(self._drafts)

    @property
    def selected_draft(self) -> str | None:
        return self._selected

    @property
    def drafter(self) -> Drafter | None:
        return self._drafts[self._selected].drafter if self._selected is not None else None

    @property
    def target_facts(self) -> ModelFacts | None:
        return self._target_facts

    def find_draft(self, path: Path | None) -> str | None:
        """The label of a loaded draft read from this file (None: of prompt lookup), if any."""
        for label, loaded in self._drafts.items():
            if path is None and loaded.facts is None:
                return label
            if (
                path is not None
                and loaded.facts is not None
                and Path(loaded.facts.path).resolve() == path.resolve()
            ):
                return label
        return None

    def draft_config(self, label: str) -> ModelConfig | None:
        """How a registered draft model was loaded (None for prompt lookup or no such label)."""
        loaded = self._drafts.get(label)
        return loaded.config if loaded is not None else None

    def draft_facts(self, label: str) -> ModelFacts | None:
        """What a registered draft model says about itself (None for prompt lookup)."""
        loaded = self._drafts.get(label)
        return loaded.facts if loaded is not None else None

    def check_draft(self, draft: Path) -> None:
        """Refuse, in words, a draft file the loaded target cannot use; reads headers only."""
        target = self._require_target()
        if self._vet_draft is not None:
            self._vet_draft(draft, target.path)

    def reset_caches(self) -> None:
        """Empty the target's and every draft's KV cache.

        The next reply then reads its prompt from scratch, as the first reply of a conversation
        does; replaying a prompt into a warm cache would make prefill and drafting look free.
        γ auto keeps what it learned about each draft, as it does between replies of a session.
        """
        engine = self._require_engine()
        assert self.target is not None
        self.target.reset()
        for loaded in self._drafts.values():
            if isinstance(loaded.drafter, ModelDrafter):
                loaded.drafter.model.reset()
        engine.set_drafter(self.drafter)

    def unload(self) -> None:
        self.clear_draft()
        if self.target is not None:
            self.target.close()
        self.target = None
        self.engine = None
        self._target_facts = None

    def _require_target(self) -> LlamaModel:
        if self.target is None:
            raise InvalidSettingError("no target model is loaded")
        return self.target

    def _require_engine(self) -> SpeculativeEngine:
        if self.engine is None:
            raise InvalidSettingError("no target model is loaded")
        return self.engine

    def _require_free(self, label: str) -> None:
        if label in self._drafts:
            raise InvalidSettingError(f"a draft named {label!r} is already loaded")

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
        engine = self._require_engine()
        return engine.generate(prompt_ids, config, control, speculative=speculative)

    def memory(self) -> MemoryUsage:
        """Bytes of the target and of the selected draft."""
        t = self._target_facts
        d = self.draft_facts(self._selected) if self._selected is not None else None
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
