"""`specchat bench`: plain decoding against every (draft, γ) configuration, measured honestly.

What "honestly" means here (shared/research/engine_anchors.md §3-4, seed 001):

- Same target, same prompts, same sampling for every configuration; the speedup of a
  configuration is its tokens per second over plain decoding's on exactly those prompts.
- Runs are interleaved (plain, config 1, config 2, …, plain, config 1, …), one block per prompt
  and repeat, so that drift of a shared machine (other processes, thermal limits) falls on every
  configuration alike instead of on whichever ran last.
- Every run starts cold: the target's and the draft's KV caches are cleared and the γ controller
  starts from nothing. Replaying a prompt into a warm cache makes prefill and drafting look free
  (pitfall P9: "only the first result is relevant").
- One untimed warm-up run per model first, so page-ins and thread start-up are nobody's cost.
- The draft reads the prompt before the timed generation, like the target does: prompt
  processing is in the time to first token for both and in tokens per second for neither.
- Acceptance figures carry their definitions: `acceptance_rate` is accepted / drafted (the
  metrics table); `alpha` is accepted / judged positions (seed 000's reading of an acceptance
  string: positions after the first rejection were never judged).
- Greedy output of every configuration is compared token for token with plain decoding's.

The measuring part (`measure`) drives a Runtime; the summarising part (`summarize`) is pure, so
its arithmetic is tested without models. No Qt here: the Compare dialog and the CLI share it.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from app.bench.prompts import BenchPrompt
from app.engine.config import MAX_GAMMA, GenerationConfig, ModelConfig, check_gamma
from app.engine.control import GenerationControl
from app.engine.drafters import Drafter, ModelDrafter, PromptLookupDrafter
from app.engine.events import FinishEvent, NoticeEvent, RoundRecord
from app.engine.result import GenerationResult
from app.engine.runtime import DraftVetter, Runtime
from app.errors import Cancelled, InvalidSettingError
from app.llama.model import LlamaModel
from app.llama.resources import GpuProbe, process_ram_bytes
from app.metrics.cost_model import expected_tokens, expected_tokens_by_position
from app.metrics.insight import conditional_acceptance
from app.metrics.summary import per_position_acceptance, ratio

AUTO: Final = "auto"
GammaSetting = int | Literal["auto"]
ALL_CLASSES = "all"
PLAIN_LABEL = "plain"
SCHEMA_VERSION = 1

# Paired speedups of one configuration spread wider than this (max / min) over prompts and
# repeats mean the machine's load changed under the runs; the table then says so.
NOISY_SPREAD = 2.0

# The short untimed run that pages weights in before anything is timed.
WARMUP_TOKENS = 16

ProgressFn = Callable[[int, int, str], None]
"""progress(done, total, message): called before each run and once at the end."""


# -- what to measure --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DraftChoice:
    """A draft to compare: a GGUF file, or prompt lookup when `path` is None."""

    label: str
    path: Path | None

    @property
    def is_lookup(self) -> bool:
        return self.path is None


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """One column of the comparison. Plain decoding has no draft and no γ."""

    label: str
    draft: DraftChoice | None
    gamma: GammaSetting | None

    @property
    def is_plain(self) -> bool:
        return self.draft is None


def parse_gammas(text: str) -> list[GammaSetting]:
    """`--gamma` value: `N`, `N,N,...`, `auto`, or a mix such as `2,4,auto`."""
    out: list[GammaSetting] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item == AUTO:
            value: GammaSetting = AUTO
        else:
            try:
                value = int(item)
            except ValueError:
                raise InvalidSettingError(
                    f"gamma must be a number in 1..{MAX_GAMMA} or 'auto', got {item!r}"
                ) from None
            check_gamma(value)
        if value not in out:
            out.append(value)
    if not out:
        raise InvalidSettingError("--gamma needs at least one value")
    return out


def plan_configs(
    drafts: Sequence[DraftChoice], gammas: Sequence[GammaSetting]
) -> list[BenchConfig]:
    """Plain first, then every draft at every γ, in the order given."""
    configs = [BenchConfig(PLAIN_LABEL, None, None)]
    for draft in drafts:
        for gamma in gammas:
            shown = AUTO if gamma == AUTO else str(gamma)
            configs.append(BenchConfig(f"{draft.label} γ={shown}", draft, gamma))
    return configs


def interleaved_schedule(
    n_configs: int, n_prompts: int, repeats: int
) -> list[tuple[int, int, int]]:
    """(config, prompt, repeat) in run order: each block runs every config once on one prompt.

    Plain (config 0) opens every block, so the order reads A B A B for one configuration and
    A B C A B C for two; any slow drift of the machine is shared out evenly.
    """
    return [
        (config, prompt, repeat)
        for repeat in range(repeats)
        for prompt in range(n_prompts)
        for config in range(n_configs)
    ]


# -- one run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One timed generation: which config, prompt and repeat, and what the engine reported."""

    sequence: int
    config: int
    prompt: int
    repeat: int
    prompt_class: str
    prompt_tokens: int
    token_ids: tuple[int, ...]
    finish_reason: str
    generation_s: float
    ttft_s: float | None
    rounds: tuple[RoundRecord, ...]
    notices: tuple[str, ...] = ()
    draft_prefill_s: float = 0.0
    rss_bytes: int | None = None
    vram_bytes: int | None = None

    @property
    def generated_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(slots=True)
class LoadedModels:
    """The target runtime plus every draft, all loaded at once so runs can interleave."""

    runtime: Runtime
    drafters: dict[str, Drafter]
    memory_bytes: dict[str, int] = field(default_factory=dict)

    def close(self) -> None:
        for drafter in self.drafters.values():
            drafter.close()
        self.drafters.clear()
        self.runtime.close()


def load_models(
    target: ModelConfig,
    drafts: Sequence[DraftChoice],
    draft_template: ModelConfig | None = None,
    vet_draft: DraftVetter | None = None,
) -> LoadedModels:
    """Load the target and every draft (vetted for vocabulary compatibility first).

    The Runtime holds one drafter at a time, which would force a reload at every switch between
    drafts; the bench keeps them all and hands the engine the one each run needs.
    draft_template carries the draft's context, GPU-layer and thread settings (path ignored).
    """
    runtime = Runtime(vet_draft=vet_draft)
    loaded = LoadedModels(runtime, {})
    try:
        facts = runtime.load_target(target)
        loaded.memory_bytes[PLAIN_LABEL] = facts.weights_bytes + facts.kv_cache_bytes
        assert runtime.target is not None
        for draft in drafts:
            if draft.path is None:
                loaded.drafters[draft.label] = PromptLookupDrafter()
                loaded.memory_bytes[draft.label] = 0
                continue
            runtime.check_draft(draft.path)
            template = draft_template or ModelConfig(str(draft.path))
            config = replace(
                template, path=str(draft.path), n_ctx=min(template.n_ctx, runtime.target.n_ctx)
            )
            model = LlamaModel(config)
            draft_facts = model.facts()
            loaded.memory_bytes[draft.label] = (
                draft_facts.weights_bytes + draft_facts.kv_cache_bytes
            )
            loaded.drafters[draft.label] = ModelDrafter(
                model, runtime.target.n_vocab, label=draft.label
            )
    except BaseException:
        loaded.close()
        raise
    return loaded


def generation_for(config: BenchConfig, base: GenerationConfig) -> GenerationConfig:
    """The GenerationConfig of one configuration; base.gamma is auto's starting γ."""
    if config.gamma is None or config.gamma == AUTO:
        return replace(base, adaptive=config.gamma == AUTO)
    return replace(base, gamma=int(config.gamma), adaptive=False)


def _select(loaded: LoadedModels, config: BenchConfig) -> Drafter | None:
    engine = loaded.runtime.engine
    assert engine is not None and loaded.runtime.target is not None
    drafter = None if config.draft is None else loaded.drafters[config.draft.label]
    # set_drafter also drops the γ controller, so γ auto learns afresh in every run: the bench
    # measures what a new conversation gets, not a controller tuned by the previous prompt.
    engine.set_drafter(drafter)
    loaded.runtime.target.reset()
    if isinstance(drafter, ModelDrafter):
        drafter.model.reset()
    return drafter


@dataclass(frozen=True, slots=True)
class Outcome:
    result: GenerationResult
    notices: tuple[str, ...]
    draft_prefill_s: float


def run_once(
    loaded: LoadedModels,
    config: BenchConfig,
    prompt_ids: Sequence[int],
    generation: GenerationConfig,
    control: GenerationControl | None = None,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> Outcome:
    """One generation from cold caches.

    The draft model reads the prompt before the generation starts, timed on its own: the
    engine excludes the target's prompt processing from tokens/s, and without this the draft's
    would land in the first round instead, inflating that round's draft cost (and misleading γ
    auto, which prices draft tokens from the rounds it has seen). The prefill time is reported
    and added to the time to first token, where the target's prefill is counted too.
    """
    drafter = _select(loaded, config)
    prefill_s = 0.0
    if isinstance(drafter, ModelDrafter) and len(prompt_ids) > 1:
        start = clock()
        drafter.model.feed(prompt_ids[:-1], 0)
        prefill_s = clock() - start
    result: GenerationResult | None = None
    notices: list[str] = []
    events = loaded.runtime.generate(
        prompt_ids, generation, control, speculative=not config.is_plain
    )
    for event in events:
        if isinstance(event, FinishEvent):
            result = event.result
        elif isinstance(event, NoticeEvent):
            notices.append(event.message)
    assert result is not None
    return Outcome(result, tuple(notices), prefill_s)


@functools.cache
def _gpu_probe() -> GpuProbe:
    # One NVML session per process; it reads "no GPU" for good on a CPU-only machine.
    return GpuProbe()


def _memory_now() -> tuple[int | None, int | None]:
    gpu = _gpu_probe().read()
    return process_ram_bytes(), gpu.used_bytes if gpu is not None else None


def measure(
    loaded: LoadedModels,
    configs: Sequence[BenchConfig],
    prompt_ids: Sequence[Sequence[int]],
    prompt_classes: Sequence[str],
    base: GenerationConfig,
    *,
    repeats: int = 1,
    warmup: bool = True,
    progress: ProgressFn | None = None,
    control: GenerationControl | None = None,
) -> list[RunRecord]:
    """Run the interleaved schedule and return every timed run, in the order they ran."""
    if not configs or not configs[0].is_plain:
        raise InvalidSettingError("the first configuration must be plain decoding")
    if repeats < 1:
        raise InvalidSettingError(f"--repeat must be at least 1, got {repeats}")
    control = control or GenerationControl()
    if warmup:
        _warm_up(loaded, configs, prompt_ids[0], base, control)
    schedule = interleaved_schedule(len(configs), len(prompt_ids), repeats)
    records: list[RunRecord] = []
    for sequence, (ci, pi, rep) in enumerate(schedule):
        if control.stop_requested:
            raise Cancelled("benchmark cancelled")
        config = configs[ci]
        if progress:
            progress(sequence, len(schedule), f"{config.label} · {prompt_classes[pi]} #{pi + 1}")
        outcome = run_once(loaded, config, prompt_ids[pi], generation_for(config, base), control)
        result = outcome.result
        if result.finish_reason == "cancelled":
            raise Cancelled("benchmark cancelled")
        rss, vram = _memory_now()
        stats = result.stats
        records.append(
            RunRecord(
                sequence=sequence,
                config=ci,
                prompt=pi,
                repeat=rep,
                prompt_class=prompt_classes[pi],
                prompt_tokens=stats.prompt_tokens,
                token_ids=tuple(result.token_ids),
                finish_reason=result.finish_reason,
                generation_s=stats.generation_s,
                ttft_s=None if stats.ttft_s is None else stats.ttft_s + outcome.draft_prefill_s,
                rounds=result.rounds,
                notices=outcome.notices,
                draft_prefill_s=outcome.draft_prefill_s,
                rss_bytes=rss,
                vram_bytes=vram,
            )
        )
    if progress:
        progress(len(schedule), len(schedule), "done")
    return records


def _warm_up(
    loaded: LoadedModels,
    configs: Sequence[BenchConfig],
    prompt: Sequence[int],
    base: GenerationConfig,
    control: GenerationControl,
) -> None:
    """Untimed: pages every model in and gives the engine its first plain-step measurement."""
    short = replace(base, max_tokens=min(WARMUP_TOKENS, base.max_tokens))
    seen: set[str] = set()
    for config in configs:
        key = PLAIN_LABEL if config.draft is None else config.draft.label
        if key in seen:
            continue
        seen.add(key)
        run_once(loaded, config, prompt, generation_for(config, short), control)


# -- summarising (pure) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figures:
    """The measured figures of one configuration over a set of runs (all prompts or one class).

    Costs are in units of one plain target step as measured by the plain runs on the same
    prompts, so c_draft, c_verify and the predictions share the unit the speedup is relative to.
    """

    runs: int
    generated_tokens: int
    generation_s: float
    tokens_per_second: float | None
    speedup: float | None
    speedup_min: float | None
    speedup_max: float | None
    speedup_second_half: float | None
    drafted: int
    accepted: int
    acceptance_rate: float | None
    alpha: float | None
    rounds: int
    tokens_per_round: float | None
    per_position_acceptance: list[float | None]
    per_position_conditional: list[float | None]
    mean_gamma: float | None
    plain_rounds: int
    ttft_s: float | None
    draft_prefill_s: float | None
    plain_step_s: float | None
    c_draft: float | None
    c_verify: float | None
    predicted_speedup: float | None
    predicted_speedup_iid: float | None
    identical_to_plain: bool | None
    mismatched_runs: int

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class ConfigReport:
    label: str
    draft: str | None
    draft_path: str | None
    gamma: GammaSetting | None
    figures: Figures
    by_class: dict[str, Figures]
    model_memory_bytes: int
    peak_rss_bytes: int | None
    peak_vram_bytes: int | None
    notices: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "draft": self.draft,
            "draft_path": self.draft_path,
            "gamma": self.gamma,
        }
        out.update(self.figures.to_json())
        out["model_memory_bytes"] = self.model_memory_bytes
        out["peak_rss_bytes"] = self.peak_rss_bytes
        out["peak_vram_bytes"] = self.peak_vram_bytes
        out["notices"] = list(self.notices)
        out["by_class"] = {name: f.to_json() for name, f in self.by_class.items()}
        return out


@dataclass(frozen=True, slots=True)
class DraftSummary:
    """How γ auto did against the best fixed γ, for one draft."""

    draft: str
    best_fixed: str | None
    best_fixed_speedup: float | None
    auto: str | None
    auto_speedup: float | None
    auto_vs_best_fixed: float | None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class BenchReport:
    target: str
    settings: dict[str, Any]
    prompts: list[dict[str, Any]]
    plain: ConfigReport
    configs: list[ConfigReport]
    drafts: list[DraftSummary]
    runs: list[dict[str, Any]]
    classes: list[str]

    def config(self, label: str) -> ConfigReport:
        for report in (self.plain, *self.configs):
            if report.label == label:
                return report
        raise KeyError(label)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "target": self.target,
            "settings": self.settings,
            "prompts": self.prompts,
            "classes": self.classes,
            "plain": self.plain.to_json(),
            "configs": [c.to_json() for c in self.configs],
            "drafts": [d.to_json() for d in self.drafts],
            "runs": self.runs,
        }


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _verify_unit(plain_runs: Sequence[RunRecord]) -> float | None:
    steps = [r.verify_s for run in plain_runs for r in run.rounds]
    return _mean(steps)


def _predict(
    rounds: Sequence[RoundRecord],
    conditional: Sequence[float | None],
    alpha: float | None,
    c_draft: float | None,
    verify_cost: Mapping[int, float],
) -> tuple[float | None, float | None]:
    """Seed 000's speedup E / cost, summed over the rounds the configuration actually ran.

    Fixed γ makes this exactly E(α, γ) / (γ·c_draft + c_verify). Rounds of other lengths (γ
    auto, or the last round cut short by the token budget) are priced at their own length, and a
    plain round inside a speculative run costs one unit and yields one token. Two variants: E
    from the per-position conditional acceptance (drops the independence assumption) and E from
    the single α with positions assumed independent (the seed's formula as written).
    """
    if not rounds:
        return None, None
    cost = 0.0
    tokens_pos = 0.0
    tokens_iid = 0.0
    for r in rounds:
        # A draft that ran passes and then proposed nothing (the p_min stop) still cost them.
        drafting = r.draft_steps * (c_draft or 0.0)
        if r.drafted == 0:
            cost += 1.0 + drafting
            tokens_pos += 1.0
            tokens_iid += 1.0
            continue
        if c_draft is None or r.drafted not in verify_cost:
            return None, None
        # Prompt lookup runs no passes; its c_draft is seconds per round instead.
        cost += (drafting if r.draft_steps else c_draft) + verify_cost[r.drafted]
        known = [a if a is not None else 0.0 for a in conditional[: r.drafted]]
        tokens_pos += expected_tokens_by_position(known)
        tokens_iid += expected_tokens(alpha or 0.0, r.drafted)
    if cost <= 0.0:
        return None, None
    return tokens_pos / cost, tokens_iid / cost


def _second_half(runs: Sequence[RunRecord]) -> tuple[int, float]:
    """Tokens and round seconds of the rounds that start in the second half of each reply.

    Where γ auto ends up matters as much as the average over a reply that includes its
    learning: this is the rate after the first half of the tokens, when it has settled.
    """
    tokens = 0
    seconds = 0.0
    for run in runs:
        half = run.generated_tokens / 2
        done = 0
        for r in run.rounds:
            if done >= half:
                tokens += r.emitted
                seconds += r.draft_s + r.verify_s
            done += r.emitted
    return tokens, seconds


def figures_for(
    runs: Sequence[RunRecord],
    plain_runs: Sequence[RunRecord],
    *,
    greedy: bool,
) -> Figures:
    """Fold the runs of one configuration; plain_runs are plain decoding on the same prompts."""
    tokens = sum(r.generated_tokens for r in runs)
    seconds = math.fsum(r.generation_s for r in runs)
    plain_tokens = sum(r.generated_tokens for r in plain_runs)
    plain_seconds = math.fsum(r.generation_s for r in plain_runs)
    tps = ratio(tokens, seconds)
    plain_tps = ratio(plain_tokens, plain_seconds)
    speedup = tps / plain_tps if tps is not None and plain_tps else None

    tail_tps = ratio(*_second_half(runs))
    plain_tail_tps = ratio(*_second_half(plain_runs))
    speedup_tail = tail_tps / plain_tail_tps if tail_tps is not None and plain_tail_tps else None

    # Paired speedups, one per (prompt, repeat) block: their spread shows how noisy the machine
    # was, which a single aggregate figure hides.
    plain_by_key = {(p.prompt, p.repeat): p for p in plain_runs}
    paired: list[float] = []
    mismatched = 0
    for run in runs:
        twin = plain_by_key.get((run.prompt, run.repeat))
        if twin is None:
            continue
        if run.token_ids != twin.token_ids:
            mismatched += 1
        run_tps = ratio(run.generated_tokens, run.generation_s)
        twin_tps = ratio(twin.generated_tokens, twin.generation_s)
        if run_tps is not None and twin_tps:
            paired.append(run_tps / twin_tps)

    rounds = [r for run in runs for r in run.rounds]
    spec_rounds = [r for r in rounds if r.drafted > 0]
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(r.accepted for r in rounds)
    rejections = sum(1 for r in rounds if r.accepted < r.drafted)
    conditional = conditional_acceptance(rounds)
    alpha = ratio(accepted, accepted + rejections)

    unit = _verify_unit(plain_runs)
    drafting_rounds = [r for r in rounds if r.draft_steps > 0]
    draft_steps = sum(r.draft_steps for r in drafting_rounds)
    c_draft = c_verify = None
    verify_cost: dict[int, float] = {}
    if unit:
        if draft_steps:
            c_draft = math.fsum(r.draft_s for r in drafting_rounds) / draft_steps / unit
        elif spec_rounds:
            c_draft = math.fsum(r.draft_s for r in spec_rounds) / len(spec_rounds) / unit
        if spec_rounds:
            c_verify = math.fsum(r.verify_s for r in spec_rounds) / len(spec_rounds) / unit
        by_length: dict[int, list[float]] = {}
        for r in spec_rounds:
            by_length.setdefault(r.drafted, []).append(r.verify_s)
        verify_cost = {n: math.fsum(v) / len(v) / unit for n, v in by_length.items()}
    predicted, predicted_iid = (None, None)
    if spec_rounds:
        predicted, predicted_iid = _predict(rounds, conditional, alpha, c_draft, verify_cost)

    ttfts = [r.ttft_s for r in runs if r.ttft_s is not None]
    identical: bool | None = None
    if greedy and plain_by_key:
        identical = mismatched == 0
    return Figures(
        runs=len(runs),
        generated_tokens=tokens,
        generation_s=seconds,
        tokens_per_second=tps,
        speedup=speedup,
        speedup_min=min(paired) if paired else None,
        speedup_max=max(paired) if paired else None,
        speedup_second_half=speedup_tail,
        drafted=drafted,
        accepted=accepted,
        acceptance_rate=ratio(accepted, drafted),
        alpha=alpha,
        rounds=len(rounds),
        tokens_per_round=ratio(sum(r.emitted for r in rounds), len(rounds)),
        per_position_acceptance=per_position_acceptance(rounds),
        per_position_conditional=conditional,
        mean_gamma=_mean([float(r.drafted) for r in spec_rounds]),
        plain_rounds=len(rounds) - len(spec_rounds),
        ttft_s=_mean(ttfts),
        draft_prefill_s=_mean([r.draft_prefill_s for r in runs]) if runs else None,
        plain_step_s=unit,
        c_draft=c_draft,
        c_verify=c_verify,
        predicted_speedup=predicted,
        predicted_speedup_iid=predicted_iid,
        identical_to_plain=identical,
        mismatched_runs=mismatched,
    )


def _config_report(
    index: int,
    *,
    config: BenchConfig,
    runs: Sequence[RunRecord],
    classes: Sequence[str],
    memory_bytes: Mapping[str, int],
    greedy: bool,
) -> ConfigReport:
    mine = [r for r in runs if r.config == index]
    plain = [r for r in runs if r.config == 0]
    by_class = {
        name: figures_for(
            [r for r in mine if r.prompt_class == name],
            [r for r in plain if r.prompt_class == name],
            greedy=greedy,
        )
        for name in classes
    }
    draft_label = config.draft.label if config.draft else None
    model_bytes = memory_bytes.get(PLAIN_LABEL, 0)
    if draft_label is not None:
        model_bytes += memory_bytes.get(draft_label, 0)
    rss = [r.rss_bytes for r in mine if r.rss_bytes is not None]
    vram = [r.vram_bytes for r in mine if r.vram_bytes is not None]
    notices = tuple(dict.fromkeys(n for r in mine for n in r.notices))
    return ConfigReport(
        label=config.label,
        draft=draft_label,
        draft_path=str(config.draft.path) if config.draft and config.draft.path else None,
        gamma=config.gamma,
        figures=figures_for(mine, plain, greedy=greedy),
        by_class=by_class,
        model_memory_bytes=model_bytes,
        peak_rss_bytes=max(rss) if rss else None,
        peak_vram_bytes=max(vram) if vram else None,
        notices=notices,
    )


def _draft_summaries(configs: Sequence[ConfigReport]) -> list[DraftSummary]:
    out: list[DraftSummary] = []
    for draft in dict.fromkeys(c.draft for c in configs if c.draft is not None):
        mine = [c for c in configs if c.draft == draft]
        fixed = [c for c in mine if c.gamma != AUTO and c.figures.speedup is not None]
        auto = next((c for c in mine if c.gamma == AUTO), None)
        best = max(fixed, key=lambda c: c.figures.speedup or 0.0, default=None)
        best_speedup = best.figures.speedup if best else None
        auto_speedup = auto.figures.speedup if auto else None
        out.append(
            DraftSummary(
                draft=draft,
                best_fixed=best.label if best else None,
                best_fixed_speedup=best_speedup,
                auto=auto.label if auto else None,
                auto_speedup=auto_speedup,
                auto_vs_best_fixed=(
                    auto_speedup / best_speedup if auto_speedup and best_speedup else None
                ),
            )
        )
    return out


def summarize(
    *,
    target: str,
    configs: Sequence[BenchConfig],
    prompts: Sequence[BenchPrompt],
    prompt_tokens: Sequence[int],
    runs: Sequence[RunRecord],
    base: GenerationConfig,
    repeats: int,
    memory_bytes: Mapping[str, int] | None = None,
    extra_settings: Mapping[str, Any] | None = None,
) -> BenchReport:
    greedy = base.sampling.greedy
    classes = list(dict.fromkeys(p.prompt_class for p in prompts))
    memory = memory_bytes or {}
    reports = [
        _config_report(i, config=c, runs=runs, classes=classes, memory_bytes=memory, greedy=greedy)
        for i, c in enumerate(configs)
    ]
    settings: dict[str, Any] = {
        "max_tokens": base.max_tokens,
        "repeat": repeats,
        "temperature": base.sampling.temperature,
        "top_k": base.sampling.top_k,
        "top_p": base.sampling.top_p,
        "min_p": base.sampling.min_p,
        "repeat_penalty": base.sampling.repeat_penalty,
        "seed": base.sampling.seed,
        "p_min": base.p_min,
        "auto_initial_gamma": base.gamma,
        "greedy": greedy,
        "exact": base.exact,
    }
    settings.update(extra_settings or {})
    return BenchReport(
        target=target,
        settings=settings,
        prompts=[
            {"class": p.prompt_class, "name": p.name, "chat": p.chat, "prompt_tokens": n}
            for p, n in zip(prompts, prompt_tokens, strict=True)
        ],
        plain=reports[0],
        configs=reports[1:],
        drafts=_draft_summaries(reports[1:]),
        runs=[
            {
                "sequence": r.sequence,
                "config": configs[r.config].label,
                "prompt": prompts[r.prompt].name,
                "class": r.prompt_class,
                "repeat": r.repeat,
                "generated_tokens": r.generated_tokens,
                "generation_s": r.generation_s,
                "tokens_per_second": ratio(r.generated_tokens, r.generation_s),
                "finish_reason": r.finish_reason,
                # The γ of every round in order (0: a plain step), so auto's choices and its
                # pauses can be read run by run.
                "gammas": [round_.drafted for round_ in r.rounds],
                "notices": list(r.notices),
            }
            for r in runs
        ],
        classes=classes,
    )


# -- the whole benchmark ----------------------------------------------------------------------


def prompt_ids_for(runtime: Runtime, prompts: Sequence[BenchPrompt]) -> list[list[int]]:
    return [
        runtime.chat_prompt([{"role": "user", "content": p.text}])
        if p.chat
        else runtime.text_prompt(p.text)
        for p in prompts
    ]


def run_benchmark(
    *,
    target: ModelConfig,
    drafts: Sequence[DraftChoice],
    gammas: Sequence[GammaSetting],
    prompts: Sequence[BenchPrompt],
    base: GenerationConfig,
    repeats: int = 1,
    draft_template: ModelConfig | None = None,
    warmup: bool = True,
    progress: ProgressFn | None = None,
    control: GenerationControl | None = None,
    vet_draft: DraftVetter | None = None,
) -> BenchReport:
    """Load the models, run the interleaved comparison, and summarise it."""
    base.validate()
    if not drafts:
        raise InvalidSettingError("the benchmark needs at least one --draft")
    if not prompts:
        raise InvalidSettingError("the benchmark needs at least one prompt")
    labels = [d.label for d in drafts]
    if len(set(labels)) != len(labels):
        raise InvalidSettingError(f"draft labels must differ, got {labels}")
    configs = plan_configs(drafts, gammas)
    loaded = load_models(target, drafts, draft_template, vet_draft)
    try:
        ids = prompt_ids_for(loaded.runtime, prompts)
        runs = measure(
            loaded,
            configs,
            ids,
            [p.prompt_class for p in prompts],
            base,
            repeats=repeats,
            warmup=warmup,
            progress=progress,
            control=control,
        )
        memory = dict(loaded.memory_bytes)
    finally:
        loaded.close()
    return summarize(
        target=target.path,
        configs=configs,
        prompts=prompts,
        prompt_tokens=[len(i) for i in ids],
        runs=runs,
        base=base,
        repeats=repeats,
        memory_bytes=memory,
        extra_settings={
            "n_ctx": target.n_ctx,
            "n_gpu_layers": target.n_gpu_layers,
            "threads": target.n_threads,
            "warmup": warmup,
        },
    )


BenchCallable = Callable[[str, ProgressFn, GenerationControl], BenchReport]
"""run(prompt_text, progress, control) -> report: what the Compare dialog runs off the UI thread."""


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
    """A benchmark of one user-written prompt, for the Compare dialog.

    It loads its own copies of the models for the run (and frees them after), so it never
    touches the window's engine while that one serves the chat.
    """

    def run(text: str, progress: ProgressFn, control: GenerationControl) -> BenchReport:
        if not text.strip():
            raise InvalidSettingError("write a prompt to compare on")
        return run_benchmark(
            target=target,
            drafts=drafts,
            gammas=gammas,
            prompts=[BenchPrompt("prompt", "prompt", text)],
            base=base,
            repeats=repeats,
            draft_template=draft_template,
            progress=progress,
            control=control,
            vet_draft=vet_draft,
        )

    return run


# -- output -----------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def format_table(report: BenchReport) -> str:
    """The human-readable summary the CLI prints."""
    header = (
        f"{'configuration':<28} {'tok/s':>7} {'speedup':>8} {'range':>11} {'2nd½':>6} "
        f"{'pred.':>6} "
        f"{'accept':>7} {'tok/rnd':>7} {'c_dr':>5} {'c_ver':>5} {'TTFT':>7} {'same':>5}"
    )
    lines = [header, "-" * len(header)]
    for c in (report.plain, *report.configs):
        f = c.figures
        spread = (
            f"{f.speedup_min:.2f}-{f.speedup_max:.2f}"
            if f.speedup_min is not None and f.speedup_max is not None and c.draft is not None
            else ""
        )
        same = (
            "" if c.draft is None else {True: "yes", False: "NO", None: "n/a"}[f.identical_to_plain]
        )
        lines.append(
            f"{c.label:<28.28} {_fmt(f.tokens_per_second, '.1f'):>7} "
            f"{_fmt(f.speedup, '.2f', '×'):>8} {spread:>11} "
            f"{_fmt(f.speedup_second_half if c.draft else None, '.2f', '×'):>6} "
            f"{_fmt(f.predicted_speedup if c.draft else None, '.2f', '×'):>6} "
            f"{_fmt(f.acceptance_rate, '.1%'):>7} {_fmt(f.tokens_per_round, '.2f'):>7} "
            f"{_fmt(f.c_draft, '.2f'):>5} {_fmt(f.c_verify, '.2f'):>5} "
            f"{_fmt(None if f.ttft_s is None else f.ttft_s * 1000, '.0f', 'ms'):>7} {same:>5}"
        )
    lines.append(
        "speedup: tok/s over plain on the same prompts; range: per prompt and repeat; 2nd½: "
        "over the second half of each reply; pred.: cost model from measured per-position "
        "acceptance and costs; accept: accepted/drafted; c_dr, c_ver: in plain steps; "
        "same: greedy output identical to plain"
    )
    noisy = [
        c.label
        for c in report.configs
        if c.figures.speedup_min
        and c.figures.speedup_max
        and c.figures.speedup_max / c.figures.speedup_min > NOISY_SPREAD
    ]
    if noisy:
        lines.append(
            f"warning: paired speedups of {len(noisy)} configuration(s) varied more than "
            f"{NOISY_SPREAD:.1f}-fold between prompts or repeats ({', '.join(noisy[:3])}"
            f"{', …' if len(noisy) > 3 else ''}); the machine was probably busy: read the "
            "aggregates with care, raise --repeat, or use fewer --threads"
        )
    if report.classes and len(report.classes) > 1:
        lines.append("")
        lines.append("speedup by prompt class")
        lines.append(f"{'configuration':<28} " + " ".join(f"{c:>10.10}" for c in report.classes))
        for c in report.configs:
            cells = [_fmt(c.by_class[name].speedup, ".2f", "×") for name in report.classes]
            lines.append(f"{c.label:<28.28} " + " ".join(f"{x:>10}" for x in cells))
    if report.settings.get("exact"):
        lines.append(
            "exact mode: every target pass, plain included, computed at least two rows, so "
            "speedups are over exact plain decoding (1.2-1.4× slower than one-row plain "
            "steps on a CPU); run without --exact to measure speed"
        )
    for d in report.drafts:
        if d.auto is not None and d.best_fixed is not None:
            lines.append("")
            best = _fmt(d.best_fixed_speedup, ".2f", "×")
            lines.append(
                f"{d.draft}: best fixed {d.best_fixed} at {best}; "
                f"auto {_fmt(d.auto_speedup, '.2f', '×')} "
                f"({_fmt(d.auto_vs_best_fixed, '.1%')} of the best fixed γ)"
            )
    return "\n".join(lines)


CSV_COLUMNS = (
    "label",
    "draft",
    "gamma",
    "class",
    "runs",
    "generated_tokens",
    "tokens_per_second",
    "speedup",
    "speedup_min",
    "speedup_max",
    "speedup_second_half",
    "predicted_speedup",
    "predicted_speedup_iid",
    "acceptance_rate",
    "alpha",
    "tokens_per_round",
    "mean_gamma",
    "c_draft",
    "c_verify",
    "ttft_s",
    "identical_to_plain",
)


def csv_rows(report: BenchReport) -> Iterator[dict[str, Any]]:
    """One row per configuration and prompt class, plus an `all` row per configuration."""
    for c in (report.plain, *report.configs):
        for name, f in [(ALL_CLASSES, c.figures), *c.by_class.items()]:
            data = f.to_json()
            row = {k: data.get(k) for k in CSV_COLUMNS}
            row.update({"label": c.label, "draft": c.draft or "", "gamma": c.gamma, "class": name})
            yield row


def to_csv(report: BenchReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(report):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def draw_speedup_chart(report: BenchReport, figure: Any) -> None:
    """Speedup over plain by configuration (groups) and prompt class (bars) on a matplotlib
    Figure; the CLI saves it, the Compare dialog shows it in a Qt canvas."""
    figure.clear()
    axes = figure.add_subplot(1, 1, 1)
    configs = report.configs
    series = [ALL_CLASSES, *report.classes] if len(report.classes) > 1 else [ALL_CLASSES]
    width = 0.8 / len(series)
    for s, name in enumerate(series):
        values = [
            (c.figures if name == ALL_CLASSES else c.by_class[name]).speedup or 0.0 for c in configs
        ]
        positions = [i - 0.4 + width * (s + 0.5) for i in range(len(configs))]
        axes.bar(
            positions,
            values,
            width=width,
            label=name,
            edgecolor="black" if name == ALL_CLASSES else "none",
            linewidth=0.8,
        )
        if name == ALL_CLASSES:
            # Whiskers: the lowest and highest paired speedup over prompts and repeats, so a
            # bar's height is read against the noise of the machine it was measured on.
            low = [v - (c.figures.speedup_min or v) for v, c in zip(values, configs, strict=True)]
            high = [(c.figures.speedup_max or v) - v for v, c in zip(values, configs, strict=True)]
            axes.errorbar(
                positions, values, yerr=[low, high], fmt="none", ecolor="black", capsize=3
            )
            predicted = [c.figures.predicted_speedup for c in configs]
            axes.scatter(
                [p for p, v in zip(positions, predicted, strict=True) if v is not None],
                [v for v in predicted if v is not None],
                marker="_",
                s=220,
                color="crimson",
                zorder=3,
                label="predicted (cost model)",
            )
    axes.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
    axes.text(len(configs) - 0.5, 1.0, " plain = 1×", va="bottom", ha="right", fontsize=8)
    axes.set_xticks(range(len(configs)))
    axes.set_xticklabels([c.label for c in configs], rotation=20, ha="right", fontsize=8)
    axes.set_ylabel("speedup over plain decoding (×)")
    mode = "greedy" if report.settings.get("greedy") else f"T={report.settings.get('temperature')}"
    axes.set_title(
        f"{Path(report.target).name}: {mode}, {report.settings.get('max_tokens')} tokens, "
        f"×{report.settings.get('repeat')}",
        fontsize=9,
    )
    axes.legend(fontsize=7, ncols=min(len(series), 4))
    figure.tight_layout()


def save_plot(report: BenchReport, path: Path) -> None:
    # The Agg canvas directly, not pyplot: no GUI backend is chosen or opened.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    figure = Figure(figsize=(max(6.0, 1.2 * len(report.configs) + 2.0), 4.5), dpi=110)
    FigureCanvasAgg(figure)
    draw_speedup_chart(report, figure)
    figure.savefig(str(path))
