"""The engine's front door for the CLI, the benchmark and the window's worker thread.

Owns at most one target and the drafts loaded for it, frees the old model before loading a
new one (two copies of a large target would not fit in VRAM), vets a draft against the target
before paying for its load, and turns chat messages into prompt ids with the target's own template
(TargetPrompts, app/engine/target_prompts.py).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.config import GenerationConfig, check_model_config
from app.engine.control import GenerationControl
from app.engine.corpus_files import forget_every_vocabulary, vocabulary_fingerprint
from app.engine.drafters import Drafter, ModelDrafter
from app.engine.events import Event
from app.engine.history_corpus import HistoryCorpus
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.loop import Clock, SpeculativeEngine
from app.engine.past_chats import HistorySource, HistoryTokens, exchange, remembering
from app.engine.suffix_drafter import SuffixDrafter
from app.engine.target_prompts import TargetPrompts
from app.errors import InvalidSettingError, SpecChatError
from app.llama.config import ModelConfig
from app.llama.facts import MemoryUsage, ModelFacts
from app.llama.model import LlamaModel, LoadProgress
from app.metrics.rounds import DraftMode

# The labels use_suffix_index and load_draft give the one draft of a chat.
SUFFIX = "suffix"
DRAFT = "draft"


@dataclass(frozen=True, slots=True)
class _Loaded:
    drafter: Drafter
    facts: ModelFacts | None  # None for the suffix index: no model
    config: ModelConfig | None = None  # how the draft model was loaded, to load it again


def _suffix_of(drafter: Drafter) -> SuffixDrafter | None:
    if isinstance(drafter, SuffixDrafter):
        return drafter
    return drafter.suffix if isinstance(drafter, HybridDrafter) else None


DraftVetter = Callable[[Path, Path], None]
"""Raises DraftIncompatibleError unless a draft file (first) suits a target file (second).

Injected by the composition roots (the CLI, the window) because reading GGUF headers is the
model library's job, and the engine must not import the library."""


ModelOpener = Callable[..., LlamaModel]
"""Opens a model file: LlamaModel itself, or a stand-in with its contract in tests."""


class Runtime(TargetPrompts):
    """At most one target, and drafts registered by label of which one at a time is selected.

    The window and `generate` use one draft (load_draft / use_suffix_index / clear_draft);
    the benchmark keeps several and selects one per run (add_draft / select_draft /
    free_draft), so runs of different drafts interleave without reloading anything.

    With `suffix_joins_models` (the default), every draft model drafts together with the suffix
    index (HybridDrafter). With `history_dir`, each loaded target gets the past-chats index of
    its vocabulary from that folder, every finished reply is added to it (unless not
    `remember_replies`; written back when `keep_history`), and suffix drafting reads it.
    """

    def __init__(
        self,
        *,
        clock: Clock = time.perf_counter,
        vet_draft: DraftVetter | None = None,
        open_model: ModelOpener = LlamaModel,
        suffix_joins_models: bool = True,
        history_dir: Path | None = None,
        keep_history: bool = True,
        remember_replies: bool = True,
        history_source: HistorySource | None = None,
    ) -> None:
        self._clock = clock
        self._vet_draft = vet_draft
        self._open_model = open_model
        self.suffix_joins_models = suffix_joins_models
        self._history_dir = history_dir
        self._keep_history = keep_history
        self._remember_replies = remember_replies
        self._history_source = history_source
        self.history: HistoryCorpus | None = None
        self.target: LlamaModel | None = None
        self.engine: SpeculativeEngine | None = None
        self._target_facts: ModelFacts | None = None
        self._drafts: dict[str, _Loaded] = {}
        self._selected: str | None = None

    # -- loading ------------------------------------------------------------------------------

    def load_target(self, config: ModelConfig, progress: LoadProgress | None = None) -> ModelFacts:
        check_model_config(config)  # before the loaded models go: a bad setting keeps them
        self.unload()
        self.target = self._open_model(config, progress=progress)
        self._target_facts = self.target.facts()
        self.engine = SpeculativeEngine(self.target, clock=self._clock)
        if self._history_dir is not None:
            self.history = HistoryCorpus(
                self._history_dir, vocabulary_fingerprint(self.target), persist=self._keep_history
            )
            if self.history.needs_rebuild:
                self._rebuild_history()
        return self._target_facts

    def forget_history(self) -> None:
        """Chats were deleted: rebuild the past-chats index from the ones that remain, so no
        deleted text is ever drafted again (the index cannot forget one document). The other
        vocabularies' indexes hold them too: they are deleted, and rebuilt when their target
        is next loaded. The target's saved conversation states go too."""
        if self.target is not None:
            self.target.prompt_cache.clear()
        if self._history_dir is not None:
            forget_every_vocabulary(self._history_dir)
        if self.history is not None:
            self.history.clear()
            self._rebuild_history()

    @contextlib.contextmanager
    def apart_from_history(self) -> Iterator[None]:
        """While it lasts, no reply joins the past-chats index and no draft reads it: a
        measurement (Compare drafts) drafts from each run's own prompt, as `specchat bench`
        does, not from the chat's earlier answer to it or from another run's reply."""
        suffixes = [s for s in map(_suffix_of, (d.drafter for d in self._drafts.values())) if s]
        held = [(s, s.corpus) for s in suffixes]
        history, remember = self.history, self._remember_replies
        self.history, self._remember_replies = None, False  # drafts added meanwhile too
        for suffix in suffixes:
            suffix.corpus = None
        try:
            yield
        finally:
            self.history, self._remember_replies = history, remember
            for suffix, corpus in held:
                suffix.corpus = corpus

    def _rebuild_history(self) -> None:
        if self.history is None or self._history_source is None or self.target is None:
            return
        # The chats' text as plain text: a "<|im_start|>" typed in a chat is no control token.
        text = functools.partial(self.target.tokenize, add_special=False, parse_special=False)

        def asked(question: str) -> Sequence[int]:
            try:
                return self.chat_prompt([{"role": "user", "content": question}])
            except SpecChatError:  # a template that cannot render it: the question alone
                return text(question)

        self.history.rebuild(self._history_source(HistoryTokens(text, asked)), newest_first=True)

    def load_draft(
        self,
        config: ModelConfig,
        progress: LoadProgress | None = None,
        *,
        vetted: bool = False,
        joined: bool | None = None,
    ) -> ModelFacts:
        """Make this draft the only one, selected; refuses an incompatible one in words.

        vetted=True skips the header check for callers that already vetted the file
        elsewhere (the window vets drafts in a helper process so the parse never holds the
        GIL of the thread that feeds the event loop). `joined` as in add_draft.
        """
        self._require_target()
        if not vetted:
            self.check_draft(Path(config.path))
        self.clear_draft()
        facts = self.add_draft(DRAFT, config, progress, vetted=True, joined=joined)
        self.select_draft(DRAFT)
        return facts

    def use_suffix_index(self) -> None:
        """Draft from the chat's own text and past chats alone, with no draft model."""
        self._require_target()
        self.clear_draft()
        self.add_suffix_index(SUFFIX)
        self.select_draft(SUFFIX)

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
        joined: bool | None = None,
    ) -> ModelFacts:
        """Load a draft model under `label` without selecting it; `joined` (by default
        suffix_joins_models) has it draft together with the suffix index."""
        target = self._require_target()
        self._require_free(label)
        if not vetted:
            self.check_draft(Path(config.path))
        draft_config = config.for_draft(target.n_ctx)
        check_model_config(draft_config)
        model = self._open_model(draft_config, progress=progress)
        facts = model.facts()
        drafter = ModelDrafter(model, target.n_vocab, label=label, clock=self._clock)
        if self.suffix_joins_models if joined is None else joined:
            hybrid = HybridDrafter(self._suffix_drafter(), drafter)
            self._drafts[label] = _Loaded(hybrid, facts, draft_config)
        else:
            self._drafts[label] = _Loaded(drafter, facts, draft_config)
        return facts

    def add_suffix_index(self, label: str) -> None:
        """Register the suffix drafter under `label` (no model) without selecting it."""
        self._require_target()
        self._require_free(label)
        self._drafts[label] = _Loaded(self._suffix_drafter(), None)

    def _suffix_drafter(self) -> SuffixDrafter:
        return SuffixDrafter(self.history, clock=self._clock)

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
        """The label of a loaded draft read from this file (None: of the suffix index), if any."""
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
        """How a registered draft model was loaded (None for the suffix index or no such label)."""
        loaded = self._drafts.get(label)
        return loaded.config if loaded is not None else None

    def draft_facts(self, label: str) -> ModelFacts | None:
        """What a registered draft model says about itself (None for the suffix index)."""
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
            drafter = loaded.drafter
            if isinstance(drafter, HybridDrafter):
                drafter = drafter.model_drafter
            if isinstance(drafter, ModelDrafter):
                drafter.model.reset()
        engine.set_drafter(self.drafter)

    def unload(self) -> None:
        self.clear_draft()
        self.history = None
        if self.target is not None:
            self.target.close()
        self.target = None
        self.engine = None
        self._target_facts = None

    def _require_engine(self) -> SpeculativeEngine:
        if self.engine is None:
            raise InvalidSettingError("no target model is loaded")
        return self.engine

    def _require_free(self, label: str) -> None:
        if label in self._drafts:
            raise InvalidSettingError(f"a draft named {label!r} is already loaded")

    # -- generating ---------------------------------------------------------------------------

    @property
    def mode(self) -> DraftMode:
        return self.drafter.mode if self.drafter is not None else "plain"

    @property
    def prompt_cached(self) -> int:
        return self.target.reused if self.target is not None else 0

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: GenerationConfig,
        control: GenerationControl | None = None,
    ) -> Iterator[Event]:
        engine = self._require_engine()
        requested_at = self._clock()
        if self.history is not None and self.history.deleted_elsewhere():
            # Another window deleted chats: the index read before may hold them.
            self._rebuild_history()
        events = engine.generate(prompt_ids, config, control, requested_at)
        if self.history is None or not self._remember_replies:
            return events
        return remembering(events, control, lambda reply: self.remember(prompt_ids, reply))

    def remember(self, prompt_ids: Sequence[int], reply_ids: Sequence[int]) -> None:
        """Add one exchange to the past-chats index: the reply with the prompt's end before
        it, so the same question asked again matches from the reply's first token."""
        if self.history is None or not reply_ids:
            return
        document = exchange(prompt_ids, reply_ids)
        if self.history.add(document) and self._keep_history:
            self.history.save()
            if self.history.needs_rebuild:
                # Another SpecChat on this data folder deleted chats, and the index with them:
                # what this one holds may include them. The reply may not be stored yet.
                self._rebuild_history()
                self.history.add(document)
                self.history.save()

    def memory(self) -> MemoryUsage:
        """Bytes of the target and of the selected draft, saved conversations as they are now."""
        t = self._target_facts
        d = self.draft_facts(self._selected) if self._selected is not None else None
        saved = self.target.prompt_cache.bytes_used if self.target is not None else 0
        return MemoryUsage(
            target_weights=t.weights_bytes if t else 0,
            target_kv=t.kv_cache_bytes if t else 0,
            draft_weights=d.weights_bytes if d else 0,
            draft_kv=d.kv_cache_bytes if d else 0,
            target_gpu_layers=t.n_gpu_layers if t else 0,
            draft_gpu_layers=d.n_gpu_layers if d else 0,
            target_saved=saved,
        )

    def close(self) -> None:
        self.unload()
