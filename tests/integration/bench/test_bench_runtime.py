"""The benchmark through Runtime: several drafts held by label and selected per run, cold caches
on demand, and a benchmark on a Runtime that already serves a chat, on the real demo models.

The target is the Q8_0 demo model (quick to load); drafts are the Q4_1 and Q4_0 ones.
Timings are never asserted.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.bench.plan import BenchSettings, DraftChoice
from app.bench.prompts import BenchPrompt
from app.bench.session import bench_on_runtime, prompt_bench_on
from app.bench.summary import BenchReport
from app.bench.turns import prompt_ids_for
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.drafters import ModelDrafter
from app.engine.gamma import AUTO, fixed
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.runtime import DRAFT, Runtime
from app.engine.suffix_drafter import SuffixDrafter
from app.errors import Cancelled, InvalidSettingError
from app.llama.config import ModelConfig
from app.metrics.cost_model import free_draft_limit

THREADS = 1
PROMPT = [BenchPrompt("prompt", "colours", "Name three colours.")]
BASE = GenerationConfig(max_tokens=8)


def _config(path: Any) -> ModelConfig:
    return ModelConfig(str(path), n_ctx=512, n_threads=THREADS)


@pytest.fixture(scope="module")
def runtime(demo_models: Any) -> Iterator[Runtime]:
    rt = Runtime()
    try:
        rt.load_target(_config(demo_models.q8_0))
        yield rt
    finally:
        rt.close()


@pytest.fixture
def chat(runtime: Runtime, demo_models: Any) -> Iterator[Runtime]:
    """The runtime as a chat leaves it: one draft loaded and selected."""
    runtime.load_draft(_config(demo_models.q4_1))
    yield runtime
    runtime.clear_draft()


def test_drafts_are_held_by_label_and_selected_one_at_a_time(
    runtime: Runtime, demo_models: Any
) -> None:
    runtime.add_draft("a", _config(demo_models.q4_1))
    runtime.add_suffix_index("lookup")
    runtime.add_draft("alone", _config(demo_models.q4_1), joined=False)
    try:
        assert runtime.draft_labels == ("a", "lookup", "alone")
        assert runtime.selected_draft is None and runtime.drafter is None
        runtime.select_draft("alone")
        assert isinstance(runtime.drafter, ModelDrafter)
        runtime.select_draft("a")  # a draft model drafts with the suffix index by default
        assert isinstance(runtime.drafter, HybridDrafter)
        assert runtime.engine is not None and runtime.engine.drafter is runtime.drafter
        runtime.select_draft("lookup")
        assert isinstance(runtime.drafter, SuffixDrafter)
        assert runtime.find_draft(demo_models.q4_1) == "a"
        assert runtime.find_draft(None) == "lookup"
        assert runtime.find_draft(demo_models.q4_0) is None
        with pytest.raises(InvalidSettingError, match="already loaded"):
            runtime.add_suffix_index("a")
        with pytest.raises(InvalidSettingError, match="no draft named"):
            runtime.select_draft("missing")
        runtime.free_draft("lookup")
        assert runtime.selected_draft is None and runtime.engine.drafter is None
        assert runtime.draft_labels == ("a", "alone")
    finally:
        runtime.clear_draft()
    assert runtime.draft_labels == ()


def test_reset_caches_empties_the_target_and_every_draft(
    runtime: Runtime, demo_models: Any
) -> None:
    runtime.add_draft("a", _config(demo_models.q4_1))
    runtime.add_draft("b", _config(demo_models.q4_0))
    try:
        runtime.select_draft("a")
        prompt = runtime.text_prompt("One, two, three,")
        list(runtime.generate(prompt, replace_tokens(4)))
        hybrid = runtime.drafter
        assert isinstance(hybrid, HybridDrafter)
        a = hybrid.model_drafter
        assert a.model.tokens
        assert runtime.target is not None and runtime.target.tokens
        runtime.reset_caches()
        assert runtime.target.tokens == [] and a.model.tokens == []
        assert runtime.selected_draft == "a"
    finally:
        runtime.clear_draft()


def replace_tokens(n: int) -> GenerationConfig:
    return GenerationConfig(max_tokens=n, gamma=fixed(2))


def test_bench_on_a_loaded_runtime_reuses_its_draft_and_loads_others_one_at_a_time(
    chat: Runtime, demo_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str, tuple[str, ...]]] = []
    add, free = chat.add_draft, chat.free_draft

    def spy_add(label: str, *args: Any, **kwargs: Any) -> Any:
        events.append(("add", label, chat.draft_labels))
        return add(label, *args, **kwargs)

    def spy_free(label: str) -> None:
        events.append(("free", label, chat.draft_labels))
        free(label)

    monkeypatch.setattr(chat, "add_draft", spy_add)
    monkeypatch.setattr(chat, "free_draft", spy_free)
    drafts = [
        DraftChoice("q4_1", demo_models.q4_1),
        DraftChoice("q4_0", demo_models.q4_0),
        DraftChoice("lookup", None),
    ]
    partials: list[BenchReport] = []
    settings = BenchSettings(drafts, [fixed(2)], PROMPT, BASE, warmup=False)
    report = bench_on_runtime(chat, settings, partial=partials.append)
    # A report after each phase but the last: the drafts measured so far have figures.
    assert [[c.figures.runs for c in p.configs] for p in partials] == [[1, 0, 0], [1, 1, 0]]
    # The chat's own Q4_1 is measured as it is, then freed while Q4_0 and lookup are added,
    # each alone, and freed; the chat's draft is loaded again at the end.
    assert [(kind, label) for kind, label, _ in events] == [
        ("free", DRAFT),
        ("add", "bench: q4_0"),
        ("free", "bench: q4_0"),
        ("free", "bench: lookup"),
        ("add", DRAFT),
    ]
    assert events[1][2] == ()  # no other draft model beside the target while Q4_0 loads
    assert chat.draft_labels == (DRAFT,) and chat.selected_draft == DRAFT
    phases = {(run["config"], run["phase"]) for run in report.runs}
    assert phases == {
        ("plain", 0),
        ("q4_1 γ=2", 0),
        ("plain", 1),
        ("q4_0 γ=2", 1),
        ("plain", 2),
        ("lookup γ=2", 2),
    }
    assert [run["sequence"] for run in report.runs] == list(range(6))
    for config in report.configs:
        assert config.figures.runs == 1
        assert config.figures.speedup is not None
    assert report.plain.figures.identical_to_plain is None  # nothing to compare it with
    for config in report.configs:
        assert config.figures.identical_to_plain is True  # greedy: every draft is exact
    assert report.config("q4_1 γ=2").model_memory_bytes > report.plain.model_memory_bytes


def test_a_cancelled_bench_leaves_the_chat_as_it_was(chat: Runtime, demo_models: Any) -> None:
    control = GenerationControl()
    seen: list[int] = []

    def progress(done: int, _total: int, _message: str) -> None:
        seen.append(done)
        if done == 2:  # inside the phase of the draft the bench loaded itself
            control.stop()

    drafts = [DraftChoice("q4_1", demo_models.q4_1), DraftChoice("q4_0", demo_models.q4_0)]
    with pytest.raises(Cancelled):
        bench_on_runtime(
            chat,
            BenchSettings(drafts, [fixed(2)], PROMPT, BASE, warmup=False),
            progress=progress,
            control=control,
        )
    assert seen == [0, 1, 2]
    assert chat.draft_labels == (DRAFT,) and chat.selected_draft == DRAFT
    assert chat.target is not None and chat.target.tokens == []


def test_progress_names_the_repeat_when_prompts_run_more_than_once(runtime: Runtime) -> None:
    def messages(repeats: int) -> list[str]:
        seen: list[str] = []
        settings = BenchSettings(
            [DraftChoice("lookup", None)],
            [fixed(2)],
            PROMPT,
            GenerationConfig(max_tokens=2),
            repeats=repeats,
            warmup=False,
        )
        bench_on_runtime(runtime, settings, progress=lambda _d, _t, text: seen.append(text))
        return seen[:-1]  # the last is "done"

    assert messages(2) == [
        "plain · prompt #1 · repeat 1/2",
        "lookup γ=2 · prompt #1 · repeat 1/2",
        "plain · prompt #1 · repeat 2/2",
        "lookup γ=2 · prompt #1 · repeat 2/2",
    ]
    assert messages(1) == ["plain · prompt #1", "lookup γ=2 · prompt #1"]


def test_the_compare_callable_on_a_runtime_refuses_an_empty_prompt_before_running(
    chat: Runtime, demo_models: Any
) -> None:
    run = prompt_bench_on(
        chat, drafts=[DraftChoice("q4_1", demo_models.q4_1)], gammas=[fixed(2)], base=BASE
    )
    with pytest.raises(InvalidSettingError, match="write a prompt"):
        run("   ", lambda *_: None, GenerationControl())
    assert chat.target is not None and chat.draft_labels == (DRAFT,)


def test_multi_turn_prompts_answer_their_earlier_turns_first(demo_models: Any) -> None:
    """A revision's prompt holds the first turn and its plain greedy reply; a question asked
    again starts a new conversation, with the earlier exchange only in the past chats."""
    revision, again = (
        BenchPrompt("revision", "r", "Say it shorter.", before=("Name three colours.",)),
        BenchPrompt(
            "asked-again", "a", "Which colours are there?", recall=("Name three colours.",)
        ),
    )
    history = tempfile.TemporaryDirectory()
    runtime = Runtime(history_dir=Path(history.name), keep_history=False, remember_replies=False)
    try:
        runtime.load_target(ModelConfig(str(demo_models.f32), n_ctx=1024, n_threads=THREADS))
        assert runtime.history is not None and runtime.history.documents == 0
        first = runtime.chat_prompt([{"role": "user", "content": "Name three colours."}])
        ids = prompt_ids_for(runtime, [revision, again], GenerationConfig(max_tokens=12))
        assert ids[0][: len(first)] == first and len(ids[0]) > len(first) + 12
        assert ids[1] == runtime.chat_prompt([{"role": "user", "content": again.text}])
        assert runtime.history.documents == 1
        # The runs themselves are not remembered: every configuration sees the same past.
        list(runtime.generate(ids[1], GenerationConfig(max_tokens=4)))
        assert runtime.history.documents == 1
    finally:
        runtime.close()
        history.cleanup()


def test_a_bench_on_a_chat_drafts_neither_from_its_past_chats_nor_from_its_own_runs(
    demo_models: Any,
) -> None:
    # Compare drafts on a chat's last question drafted the chat's earlier answer whole from the
    # past chats (every draft "100 %, one round"), and each run's reply joined them for the next.
    history = tempfile.TemporaryDirectory()
    chat = Runtime(history_dir=Path(history.name), keep_history=False)
    try:
        chat.load_target(_config(demo_models.q8_0))
        chat.use_suffix_index()
        asked = chat.chat_prompt([{"role": "user", "content": PROMPT[0].text}])
        list(chat.generate(asked, GenerationConfig(max_tokens=24)))  # the chat's answer
        assert chat.history is not None and chat.history.documents == 1
        settings = BenchSettings(
            [DraftChoice("suffix", None), DraftChoice("q4_1", demo_models.q4_1)],
            [AUTO],
            PROMPT,
            GenerationConfig(max_tokens=24),
            warmup=False,
        )
        report = bench_on_runtime(chat, settings)
        suffix, hybrid = report.config("suffix γ=auto"), report.config("q4_1 γ=auto")
        # The prompt alone holds little to draft from (2 and 0 tokens kept when written); the
        # chat's answer in the past chats gave 14 and 22 of the 23.
        assert suffix.figures.accepted is not None and suffix.figures.accepted < 8
        assert hybrid.figures.suffix_accepted is not None and hybrid.figures.suffix_accepted < 8
        assert chat.history.documents == 1  # no run's reply was remembered
        # And the chat drafts from its past chats again afterwards.
        drafter = chat.drafter
        assert isinstance(drafter, SuffixDrafter) and drafter.corpus is chat.history
        list(chat.generate(chat.chat_prompt([{"role": "user", "content": "Hi."}]), BASE))
        assert chat.history.documents == 2
    finally:
        chat.close()
        history.cleanup()


def test_the_warm_up_verifies_the_widest_round_twice_before_anything_is_timed(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first pass of a new width costs more than later ones (fresh memory for its logits);
    # the warm-up pays it, twice over with the first result held, as a round holds the last.
    target = runtime.target
    assert target is not None
    feed = target.feed
    calls: list[tuple[int, int, bool]] = []  # history length, rows, before the first timed run
    timed: list[int] = []

    def spy(history: Any, n_logits: int) -> Any:
        calls.append((len(history), n_logits, not timed))
        return feed(history, n_logits)

    def progress(done: int, _total: int, _message: str) -> None:
        if not timed:
            assert target.tokens == []  # the first timed run starts cold all the same
        timed.append(done)

    monkeypatch.setattr(target, "feed", spy)
    prompts = [*PROMPT, BenchPrompt("prompt", "longer", "Name three colours and three fruits.")]
    settings = BenchSettings([DraftChoice("lookup", None)], [fixed(2)], prompts, BASE)
    bench_on_runtime(runtime, settings, progress=progress)
    longest = max(len(ids) for ids in prompt_ids_for(runtime, prompts, BASE))
    rows = free_draft_limit(target.n_batch) + 1
    widest = (longest + max(BASE.max_tokens, rows), rows, True)
    assert calls.count(widest) == 2
    assert max(n for _, n, _ in calls) == rows
