"""A whole benchmark: models into a Runtime, the phases measured, the report summarised.

Two ways in. `run_benchmark` loads the target and every draft into a Runtime of its own (what
`specchat bench` does), so every configuration runs interleaved with every other. `bench_on_runtime`
works on a Runtime that already serves a chat (the window's): the drafts it already holds are
used as they are, and every other draft is loaded alone, measured side by side with plain
decoding in a phase of its own, and freed before the next is loaded, so no second copy of any
model is ever made. Both are cancellable between runs and during a draft's load.

Both measure what they can: a draft that cannot be loaded (a broken or incompatible file) is
that draft's configurations' `error` in the report and the other drafts are still measured;
only when no draft at all could be loaded is its error the benchmark's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from app.bench.figures import RunRecord
from app.bench.plan import PLAIN_LABEL, BenchConfig, BenchSettings, DraftChoice
from app.bench.prompts import BenchPrompt
from app.bench.run import (
    Measurement,
    MeasurementStopped,
    Phase,
    ProgressFn,
    RunsSoFar,
    measure,
    phase_runs,
)
from app.bench.summary import BenchReport, summarize
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.gamma import GammaSetting
from app.engine.runtime import DraftVetter, Runtime
from app.errors import Cancelled, InvalidSettingError, SpecChatError, user_message
from app.leftovers import scratch_dir
from app.llama.config import ModelConfig
from app.llama.model import LoadProgress

# Drafts the benchmark loads are held under this prefix, apart from the labels of a chat's own.
_LABEL_PREFIX = "bench: "


def _cancellable(control: GenerationControl) -> LoadProgress:
    return lambda _fraction: not control.stop_requested


def _add_draft(
    runtime: Runtime,
    draft: DraftChoice,
    template: ModelConfig | None,
    control: GenerationControl,
) -> str:
    """Load one draft into the runtime for the benchmark; returns the label it is held under."""
    label = _LABEL_PREFIX + draft.label
    if draft.path is None:
        runtime.add_suffix_index(label)
        return label
    config = replace(template or ModelConfig(str(draft.path)), path=str(draft.path))
    runtime.add_draft(label, config, progress=_cancellable(control), joined=draft.suffix)
    return label


Failures = dict[str, SpecChatError]
"""A draft's label → why it could not be loaded."""


def _try_add_draft(
    runtime: Runtime,
    draft: DraftChoice,
    template: ModelConfig | None,
    control: GenerationControl,
    failed: Failures,
) -> str | None:
    """_add_draft, or None with the reason put in `failed` when the draft cannot be loaded:
    one broken file among the drafts is that draft's row of the report, not the end of it."""
    try:
        return _add_draft(runtime, draft, template, control)
    except Cancelled:
        raise
    except SpecChatError as exc:
        failed[draft.label] = exc
        return None


def _check_some_loaded(drafts: Sequence[DraftChoice], failed: Failures) -> None:
    """Raise the first draft's error when every draft failed: there is nothing to compare."""
    if drafts and all(d.label in failed for d in drafts):
        raise failed[drafts[0].label]


def _park(runtime: Runtime, labels: Sequence[str]) -> dict[str, ModelConfig]:
    """Free the draft models held under `labels`; returns how to load each again."""
    parked = {}
    for label in labels:
        config = runtime.draft_config(label)
        if config is not None:
            parked[label] = config
            runtime.free_draft(label)
    return parked


def _model_bytes(runtime: Runtime, label: str | None) -> int:
    facts = runtime.target_facts if label is None else runtime.draft_facts(label)
    return facts.weights_bytes + facts.kv_cache_bytes if facts is not None else 0


def _memory(runtime: Runtime, labels: dict[str, str]) -> dict[str, int]:
    """Bytes per model held: the target under PLAIN_LABEL, each draft under its bench label."""
    memory = {PLAIN_LABEL: _model_bytes(runtime, None)}
    memory.update({name: _model_bytes(runtime, label) for name, label in labels.items()})
    return memory


def _phase_configs(
    configs: Sequence[BenchConfig], drafts: Sequence[DraftChoice]
) -> tuple[int, ...]:
    names = {d.label for d in drafts}
    return tuple(i for i, c in enumerate(configs) if c.draft is not None and c.draft.label in names)


def _report(
    bench: Measurement,
    runs: Sequence[RunRecord],
    memory: dict[str, int],
    failed: Failures,
    stopped: RunsSoFar | None = None,
) -> BenchReport:
    assert bench.runtime.target is not None
    target = bench.runtime.target.config
    settings = bench.settings
    return summarize(
        target=target.path,
        configs=bench.configs,
        prompts=settings.prompts,
        prompt_tokens=[len(i) for i in bench.prompt_ids],
        runs=runs,
        base=settings.base,
        repeats=settings.repeats,
        memory_bytes=memory,
        extra_settings={
            "n_ctx": target.n_ctx,
            "n_gpu_layers": target.n_gpu_layers,
            "threads": target.n_threads,
            "warmup": settings.warmup,
        },
        errors={label: user_message(exc) for label, exc in failed.items()},
        interrupted=stopped is not None,
        uncounted=stopped.cut_block if stopped is not None else (),
    )


def run_benchmark(
    target: ModelConfig,
    settings: BenchSettings,
    *,
    progress: ProgressFn | None = None,
    control: GenerationControl | None = None,
    vet_draft: DraftVetter | None = None,
    keep_partial: bool = False,
    checkpoint: PartialFn | None = None,
) -> BenchReport:
    """Load the target and every draft (vetted first), run them all interleaved, summarise.

    With keep_partial, a stop (`control`) once the timed runs have begun returns the report of
    the runs completed before it, marked interrupted, instead of raising Cancelled; its figures
    count only the blocks every configuration finished (a block cut short would compare plain
    and the others on different prompts), and the cut block's finished runs are listed apart.
    A stop while the models load still raises Cancelled: nothing was measured. `checkpoint`,
    when given, receives after every timed run the report a stop there would return."""
    settings.check()
    control = control or GenerationControl()
    # The suffix drafter's past chats are the prompts' `recall` turns alone: replies of the
    # runs themselves are not remembered, so no configuration drafts from another's output.
    history = scratch_dir("bench")
    runtime = Runtime(
        vet_draft=vet_draft,
        history_dir=Path(history.name),
        keep_history=False,
        remember_replies=False,
    )
    try:
        runtime.load_target(target, progress=_cancellable(control))
        failed: Failures = {}
        labels: dict[str, str] = {}
        for d in settings.drafts:
            label = _try_add_draft(runtime, d, settings.draft_template, control, failed)
            if label is not None:
                labels[d.label] = label
        _check_some_loaded(settings.drafts, failed)
        memory = _memory(runtime, labels)
        bench = Measurement.prepare(runtime, settings, progress, control)
        loaded = [d for d in settings.drafts if d.label in labels]
        phase = Phase(configs=_phase_configs(bench.configs, loaded))

        def partial_report(so_far: RunsSoFar) -> BenchReport:
            return _report(bench, so_far.whole_blocks, memory, failed, so_far)

        runs_done = None if checkpoint is None else lambda s: checkpoint(partial_report(s))
        try:
            runs = measure(bench, labels, phase, runs_done)
        except MeasurementStopped as stopped:
            if not keep_partial:
                raise
            return partial_report(stopped.so_far)
        return _report(bench, runs, memory, failed)
    finally:
        runtime.close()
        history.cleanup()


def bench_on_runtime(
    runtime: Runtime,
    settings: BenchSettings,
    *,
    progress: ProgressFn | None = None,
    control: GenerationControl | None = None,
    partial: PartialFn | None = None,
) -> BenchReport:
    """Benchmark on a Runtime that already holds the target, loading no second copy of anything.

    Drafts the runtime holds (same file, or the suffix index) run in phase 0 with plain decoding,
    and are then freed while each other draft gets a phase of its own (loaded, measured with
    plain, freed), so at most one draft model sits beside the target at any time. Each
    configuration's speedup is over the plain runs of its own phase. Afterwards the runtime's
    drafts are loaded again and the one that was selected is selected, with cold caches.
    `partial`, when given, receives the report of the phases measured so far as each ends, so
    a table can fill draft by draft. A draft that fails to load is left out of the runs (its
    phase with it) and named in the report, as in run_benchmark.
    """
    if runtime.target is None:
        raise InvalidSettingError("no target model is loaded")
    settings.check()
    control = control or GenerationControl()
    drafts = settings.drafts
    labels: dict[str, str] = {}
    for d in drafts:
        held = runtime.find_draft(d.path)
        if held is not None:
            labels[d.label] = held
    resident = [d for d in drafts if d.label in labels]
    phases = ([resident] if resident else []) + [[d] for d in drafts if d.label not in labels]
    bench = Measurement.prepare(runtime, settings, progress, control)
    counts = [len(_phase_configs(bench.configs, group)) + 1 for group in phases]
    total = sum(phase_runs(n, len(bench.prompt_ids), settings.repeats) for n in counts)
    memory = _memory(runtime, labels)
    selected = runtime.selected_draft
    runs: list[RunRecord] = []
    parked: dict[str, ModelConfig] = {}
    failed: Failures = {}
    try:
        # The chat's earlier answer to the prompt, or another run's reply, would be drafted
        # whole from the past chats: each run drafts from its own prompt, as run_benchmark's do.
        with runtime.apart_from_history():
            for index, group in enumerate(phases):
                if index == 1 and resident:
                    # The chat's own drafts were measured in phase 0: free them while the others
                    # take their turns, so at most one draft model is held beside the target.
                    parked = _park(runtime, [labels[d.label] for d in resident])
                added: list[str] = []
                try:
                    for d in group:
                        if d.label in labels:
                            continue
                        label = _try_add_draft(runtime, d, settings.draft_template, control, failed)
                        if label is not None:
                            labels[d.label] = label
                            added.append(label)
                            memory[d.label] = _model_bytes(runtime, label)
                    loaded = [d for d in group if d.label in labels]
                    if loaded:
                        phase = Phase(
                            index, _phase_configs(bench.configs, loaded), len(runs), total
                        )
                        runs += measure(bench, labels, phase)
                    else:
                        # Its runs will never be made: progress counts to what does run.
                        total -= phase_runs(counts[index], len(bench.prompt_ids), settings.repeats)
                        if progress is not None and len(runs) == total:
                            progress(total, total, "done")
                    if partial is not None and index < len(phases) - 1:
                        partial(_report(bench, runs, memory, failed))
                finally:
                    for label in added:
                        runtime.free_draft(label)
            _check_some_loaded(drafts, failed)
    finally:
        for label, config in parked.items():
            runtime.add_draft(label, config, vetted=True)
        runtime.select_draft(selected if selected in runtime.draft_labels else None)
        runtime.reset_caches()
    return _report(bench, runs, memory, failed)


PartialFn = Callable[[BenchReport], None]
"""partial(report): the figures of the runs measured so far (configurations not run yet have
none)."""


class BenchCallable(Protocol):
    """What the Compare dialog runs off the UI thread: run(prompt_text, progress, control)."""

    def __call__(
        self,
        text: str,
        progress: ProgressFn,
        control: GenerationControl,
        partial: PartialFn | None = None,
    ) -> BenchReport: ...


_SettingsBench = Callable[
    [BenchSettings, ProgressFn, GenerationControl, PartialFn | None], BenchReport
]


def _on_prompt(settings: BenchSettings, bench: _SettingsBench) -> BenchCallable:
    """What the Compare dialog runs: `bench` on the settings with the user's prompt as their
    one prompt."""

    def run(
        text: str,
        progress: ProgressFn,
        control: GenerationControl,
        partial: PartialFn | None = None,
    ) -> BenchReport:
        if not text.strip():
            raise InvalidSettingError("write a prompt to compare on")
        prompts = [BenchPrompt("prompt", "prompt", text)]
        return bench(replace(settings, prompts=prompts), progress, control, partial)

    return run


def prompt_bench(
    *,
    target: ModelConfig,
    drafts: Sequence[DraftChoice],
    gammas: Sequence[GammaSetting],
    base: GenerationConfig,
    repeats: int = 1,
    draft_template: ModelConfig | None = None,
    vet_draft: DraftVetter | None = None,
) -> BenchCallable:
    """A benchmark of one user-written prompt that loads its own copies of the models.

    Every configuration runs interleaved with every other: one report, no partial ones.
    """
    return _on_prompt(
        BenchSettings(drafts, gammas, (), base, repeats, draft_template),
        lambda settings, progress, control, _partial: run_benchmark(
            target, settings, progress=progress, control=control, vet_draft=vet_draft
        ),
    )


def prompt_bench_on(
    runtime: Runtime,
    *,
    drafts: Sequence[DraftChoice],
    gammas: Sequence[GammaSetting],
    base: GenerationConfig,
    repeats: int = 1,
    draft_template: ModelConfig | None = None,
) -> BenchCallable:
    """A benchmark of one user-written prompt on an already-loaded Runtime.

    The callable must run on the thread that owns the runtime (the window's engine worker).
    """
    return _on_prompt(
        BenchSettings(drafts, gammas, (), base, repeats, draft_template),
        lambda settings, progress, control, partial: bench_on_runtime(
            runtime, settings, progress=progress, control=control, partial=partial
        ),
    )
