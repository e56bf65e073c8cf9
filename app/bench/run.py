"""Timed runs through a Runtime: plain decoding against every (draft, γ) configuration.

What makes the comparison honest:

- Same target, same prompts, same sampling for every configuration; the speedup of a
  configuration is its tokens per second over plain decoding's on exactly those prompts.
- Runs are interleaved (plain, config 1, config 2, …, plain, config 1, …), one block per prompt
  and repeat, so that drift of a shared machine (other processes, thermal limits) falls on every
  configuration alike instead of on whichever ran last.
- Every run starts cold (Runtime.reset_caches): the target's and the drafts' KV caches are
  cleared. Replaying a prompt into a warm cache makes prefill and drafting look free; only the
  first run of a prompt is what a user gets. γ auto keeps what earlier runs with the same draft
  taught it, as it does from one reply to the next in a chat session.
- One untimed warm-up run per model first, so page-ins and thread start-up are nobody's cost,
  then two target passes as wide and as deep as any round verifies, so that memory first
  used for that many logits is not charged to whichever configuration gets there first.
- The engine has the draft read the prompt with the target, before the first round: prompt
  processing is in the time to first token for both and in tokens per second for neither.
- Greedy output of every configuration is compared token for token with plain decoding's.

No model loading here: the Runtime holds the models (app/bench/session.py loads them). No Qt
either: the Compare dialog and the CLI share this.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from app.bench.figures import RunRecord
from app.bench.plan import (
    PLAIN_LABEL,
    BenchConfig,
    BenchSettings,
    check_repeats,
    generation_for,
    interleaved_schedule,
    repeat_note,
)
from app.bench.turns import prompt_ids_for
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import FinishEvent, NoticeEvent
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.engine.suffix_drafter import SuffixDrafter
from app.errors import Cancelled, InvalidSettingError
from app.llama.resources import GpuProbe, process_ram_bytes
from app.metrics.cost_model import free_draft_limit

# The short untimed run that pages weights in before anything is timed.
WARMUP_TOKENS = 16

ProgressFn = Callable[[int, int, str], None]
"""progress(done, total, message): called before each run and once at the end."""

DraftLabels = Mapping[str, str]
"""A configuration's draft label → the label the Runtime holds that draft under."""


@dataclass(frozen=True)
class RunsSoFar:
    """The runs a phase has completed, in run order. Runs come in blocks of one run per
    configuration (plain first) on one prompt and repeat; only whole blocks compare every
    configuration on the same prompts."""

    records: Sequence[RunRecord]
    block_size: int

    @property
    def whole_blocks(self) -> list[RunRecord]:
        """The runs of the blocks every configuration finished."""
        return list(self.records[: len(self.records) - len(self.records) % self.block_size])

    @property
    def cut_block(self) -> list[RunRecord]:
        """The runs of the block not finished yet (the one a stop cut short)."""
        return list(self.records[len(self.whole_blocks) :])


RunsFn = Callable[[RunsSoFar], None]
"""runs_done(so_far): called after each timed run, with every run the phase completed."""


class MeasurementStopped(Cancelled):
    """The stop control ended a phase between or inside its runs. Carries the runs that were
    complete before it, so a caller that keeps partial results (`specchat bench` on SIGINT)
    can still report them; the run that was cut is not among them."""

    def __init__(self, so_far: RunsSoFar) -> None:
        super().__init__("benchmark cancelled")
        self.so_far = so_far


@dataclass(frozen=True, slots=True)
class Outcome:
    result: GenerationResult
    notices: tuple[str, ...]


def run_once(
    runtime: Runtime,
    config: BenchConfig,
    labels: DraftLabels,
    prompt_ids: Sequence[int],
    *,
    generation: GenerationConfig,
    control: GenerationControl | None = None,
) -> Outcome:
    """One generation from cold caches with the configuration's draft selected."""
    runtime.select_draft(None if config.draft is None else labels[config.draft.label])
    if isinstance(runtime.drafter, SuffixDrafter) and config.draft is not None:
        runtime.drafter.trees.mode = config.draft.trees
    runtime.reset_caches()
    result: GenerationResult | None = None
    notices: list[str] = []
    events = runtime.generate(prompt_ids, generation, control)
    for event in events:
        if isinstance(event, FinishEvent):
            result = event.result
        elif isinstance(event, NoticeEvent):
            notices.append(event.message)
    assert result is not None
    return Outcome(result, tuple(notices))


@functools.cache
def _gpu_probe() -> GpuProbe:
    # One NVML session per process; it reads "no GPU" for good on a CPU-only machine.
    return GpuProbe()


def _memory_now() -> tuple[int | None, int | None]:
    gpu = _gpu_probe().read()
    return process_ram_bytes(), gpu.used_bytes if gpu is not None else None


@dataclass(frozen=True, slots=True)
class Phase:
    """Configurations measured side by side while the same models stay loaded.

    configs indexes the whole plan; plain (index 0) is always measured too. first_sequence and
    total place this phase's runs in the whole benchmark's numbering and progress.
    """

    index: int = 0
    configs: tuple[int, ...] | None = None  # None: every configuration of the plan
    first_sequence: int = 0
    total: int | None = None


def phase_runs(n_configs: int, n_prompts: int, repeats: int) -> int:
    """How many timed runs a phase of n_configs configurations (plain included) makes."""
    return n_configs * n_prompts * repeats


@dataclass(frozen=True)
class Measurement:
    """What every phase of one benchmark runs with: the models, the settings and the plan made
    of them, the prompts' token ids, the progress and stop control."""

    runtime: Runtime
    settings: BenchSettings
    configs: Sequence[BenchConfig]
    prompt_ids: Sequence[Sequence[int]]
    progress: ProgressFn | None
    control: GenerationControl

    @classmethod
    def prepare(
        cls,
        runtime: Runtime,
        settings: BenchSettings,
        progress: ProgressFn | None,
        control: GenerationControl,
    ) -> Measurement:
        """The plan of `settings`, its prompts' ids made on `runtime` (earlier turns answered)."""
        ids = prompt_ids_for(runtime, settings.prompts, settings.base)
        return cls(runtime, settings, settings.configs(), ids, progress, control)


def measure(
    bench: Measurement,
    labels: DraftLabels,
    phase: Phase | None = None,
    runs_done: RunsFn | None = None,
) -> list[RunRecord]:
    """Run the interleaved schedule of one phase and return every timed run, in run order."""
    settings = bench.settings
    if not bench.configs or not bench.configs[0].is_plain:
        raise InvalidSettingError("the first configuration must be plain decoding")
    check_repeats(settings.repeats)
    phase = phase or Phase()
    chosen = [0, *(i for i in (phase.configs or range(1, len(bench.configs))) if i != 0)]
    schedule = interleaved_schedule(len(chosen), len(bench.prompt_ids), settings.repeats)
    total = phase.total if phase.total is not None else len(schedule)
    if settings.warmup:
        _warm_up(bench, [bench.configs[i] for i in chosen], labels)
        if phase.index == 0:  # later phases load drafts beside the same target
            longest = max(bench.prompt_ids, key=len)
            _widest_verification(bench.runtime, longest, settings.base.max_tokens)
    records: list[RunRecord] = []
    for offset, (slot, pi, rep) in enumerate(schedule):
        if bench.control.stop_requested:
            raise MeasurementStopped(RunsSoFar(tuple(records), len(chosen)))
        ci = chosen[slot]
        config = bench.configs[ci]
        sequence = phase.first_sequence + offset
        prompt_class = settings.prompts[pi].prompt_class
        if bench.progress:
            where = f"{prompt_class} #{pi + 1}{repeat_note(rep, settings.repeats)}"
            bench.progress(sequence, total, f"{config.label} · {where}")
        outcome = run_once(
            bench.runtime,
            config,
            labels,
            bench.prompt_ids[pi],
            generation=generation_for(config, settings.base),
            control=bench.control,
        )
        result = outcome.result
        if result.finish_reason == "cancelled":
            raise MeasurementStopped(RunsSoFar(tuple(records), len(chosen)))
        rss, vram = _memory_now()
        stats = result.stats
        records.append(
            RunRecord(
                sequence=sequence,
                config=ci,
                prompt=pi,
                repeat=rep,
                prompt_class=prompt_class,
                prompt_tokens=stats.prompt_tokens,
                token_ids=tuple(result.token_ids),
                finish_reason=result.finish_reason,
                generation_s=stats.generation_s,
                ttft_s=stats.ttft_s,
                rounds=result.rounds,
                notices=outcome.notices,
                draft_prefill_s=stats.draft_prefill_s,
                rss_bytes=rss,
                vram_bytes=vram,
                phase=phase.index,
            )
        )
        if runs_done is not None:
            runs_done(RunsSoFar(tuple(records), len(chosen)))
    if bench.progress and phase.first_sequence + len(schedule) >= total:
        bench.progress(total, total, "done")
    return records


def _warm_up(bench: Measurement, configs: Sequence[BenchConfig], labels: DraftLabels) -> None:
    """Untimed: pages every model in and gives the engine its first plain-step measurement."""
    base = bench.settings.base
    short = replace(base, max_tokens=min(WARMUP_TOKENS, base.max_tokens))
    seen: set[str] = set()
    for config in configs:
        key = PLAIN_LABEL if config.draft is None else config.draft.label
        if key in seen:
            continue
        seen.add(key)
        if bench.control.stop_requested:
            raise Cancelled("benchmark cancelled")
        run_once(
            bench.runtime,
            config,
            labels,
            bench.prompt_ids[0],
            generation=generation_for(config, short),
            control=bench.control,
        )


def _widest_verification(runtime: Runtime, prompt_ids: Sequence[int], max_tokens: int) -> None:
    """Untimed: two target passes as far into the context as the bench goes, each returning as
    many rows as a round can ever verify (the longest free draft and its bonus row), the first
    result held while the second is made, as a round holds the last round's. The first time
    a process needs that much memory for logits (and llama.cpp, for its output buffer) it
    costs more than any time after: on this project's CPU machine, 30-110 ms for the demo
    target's 63-65 rows and up to 0.9 s for 65 rows of a 262k-token vocabulary. Left to the
    timed runs, that would fall on whichever configuration drafts that far first."""
    target = runtime.target
    if target is None or not prompt_ids:
        return
    rows = free_draft_limit(target.n_batch) + 1
    length = min(target.n_ctx, len(prompt_ids) + max(max_tokens, rows))
    rows = min(rows, length)
    history = [prompt_ids[i % len(prompt_ids)] for i in range(length)]
    held = target.feed(history, rows)
    target.feed(history, rows)
    del held
    runtime.reset_caches()
