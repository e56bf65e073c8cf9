"""The benchmark's report: every configuration's figures, overall and by prompt class, how γ
auto did against the best fixed γ, and every run, in the JSON shape docs/benchmarks.md lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.bench.figures import Figures, RunRecord, figures_for
from app.bench.plan import PLAIN_LABEL, BenchConfig
from app.bench.prompts import BenchPrompt
from app.engine.config import GenerationConfig
from app.engine.gamma import AUTO_START_GAMMA, GammaSetting
from app.metrics.measured import decode_rate

SCHEMA_VERSION = 1


def gamma_json(setting: GammaSetting) -> int | str | None:
    """The `gamma` field of a configuration: its fixed length, "auto", or null for plain."""
    if setting.is_off:
        return None
    return "auto" if setting.is_auto else setting.length


@dataclass(frozen=True, slots=True)
class ConfigReport:
    label: str
    draft: str | None
    source: str | None  # model, suffix or hybrid; None for plain
    draft_path: str | None
    gamma: GammaSetting
    figures: Figures
    by_class: dict[str, Figures]
    model_memory_bytes: int
    peak_rss_bytes: int | None
    peak_vram_bytes: int | None
    notices: tuple[str, ...]
    # Why the configuration has no runs when its draft could not be loaded (None: it loaded).
    error: str | None = None

    @property
    def measured(self) -> bool:
        return self.figures.runs > 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "draft": self.draft,
            "source": self.source,
            "draft_path": self.draft_path,
            "gamma": gamma_json(self.gamma),
            "gamma_setting": str(self.gamma),
        }
        out.update(self.figures.to_json())
        out["model_memory_bytes"] = self.model_memory_bytes
        out["peak_rss_bytes"] = self.peak_rss_bytes
        out["peak_vram_bytes"] = self.peak_vram_bytes
        out["notices"] = list(self.notices)
        out["error"] = self.error
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
    # A stop (SIGINT, SIGTERM) ended the measuring early: the figures are of the runs completed
    # before it.
    interrupted: bool = False

    def config(self, label: str) -> ConfigReport:
        for report in (self.plain, *self.configs):
            if report.label == label:
                return report
        raise KeyError(label)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "interrupted": self.interrupted,
            "target": self.target,
            "settings": self.settings,
            "prompts": self.prompts,
            "classes": self.classes,
            "plain": self.plain.to_json(),
            "configs": [c.to_json() for c in self.configs],
            "drafts": [d.to_json() for d in self.drafts],
            "runs": self.runs,
        }


def _config_report(
    index: int,
    *,
    config: BenchConfig,
    runs: Sequence[RunRecord],
    classes: Sequence[str],
    memory_bytes: Mapping[str, int],
    greedy: bool,
    errors: Mapping[str, str],
) -> ConfigReport:
    mine = [r for r in runs if r.config == index]
    phases = {r.phase for r in mine}
    # Plain decoding is the yardstick of the phases this configuration ran in.
    plain = [r for r in runs if r.config == 0 and (index == 0 or r.phase in phases)]
    by_class = {
        name: figures_for(
            [r for r in mine if r.prompt_class == name],
            [r for r in plain if r.prompt_class == name],
            greedy=greedy,
            is_plain=index == 0,
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
        source=config.draft.source if config.draft else None,
        draft_path=str(config.draft.path) if config.draft and config.draft.path else None,
        gamma=config.gamma,
        figures=figures_for(mine, plain, greedy=greedy, is_plain=index == 0),
        by_class=by_class,
        model_memory_bytes=model_bytes,
        peak_rss_bytes=max(rss) if rss else None,
        peak_vram_bytes=max(vram) if vram else None,
        notices=notices,
        error=errors.get(draft_label) if draft_label is not None else None,
    )


def _draft_summaries(configs: Sequence[ConfigReport]) -> list[DraftSummary]:
    out: list[DraftSummary] = []
    for draft in dict.fromkeys(c.draft for c in configs if c.draft is not None):
        mine = [c for c in configs if c.draft == draft]
        fixed = [c for c in mine if not c.gamma.is_auto and c.figures.speedup is not None]
        auto = next((c for c in mine if c.gamma.is_auto), None)
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
    errors: Mapping[str, str] | None = None,
    interrupted: bool = False,
    uncounted: Sequence[RunRecord] = (),
) -> BenchReport:
    """The report of `runs`; `errors` gives, by draft label, why a draft could not be loaded
    (its configurations then have no runs). `uncounted` runs were completed but left out of
    every figure (the block an interruption cut short): they are listed in `runs` with
    `counted` false."""
    greedy = base.sampling.greedy
    classes = list(dict.fromkeys(p.prompt_class for p in prompts))
    memory = memory_bytes or {}
    reports = [
        _config_report(
            i,
            config=c,
            runs=runs,
            classes=classes,
            memory_bytes=memory,
            greedy=greedy,
            errors=errors or {},
        )
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
        "auto_initial_gamma": AUTO_START_GAMMA,
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
                "counted": counted,
                "config": configs[r.config].label,
                "prompt": prompts[r.prompt].name,
                "class": r.prompt_class,
                "repeat": r.repeat,
                "phase": r.phase,
                "generated_tokens": r.generated_tokens,
                "generation_s": r.generation_s,
                "tokens_per_second": decode_rate(r.generated_tokens, r.generation_s),
                "finish_reason": r.finish_reason,
                # The γ every round asked for, in order (0: a plain step), as gamma_histogram
                # counts it, so auto's choices and its pauses can be read run by run; with the
                # tokens each round drafted and kept, a run's acceptance can be replayed (γ
                # auto's simulator needs real, bursty text). The suffix index's free tokens
                # may draft past γ, so `drafted` can exceed `gammas`.
                "gammas": [round_.gamma if round_.speculative else 0 for round_ in r.rounds],
                "drafted": [round_.drafted for round_ in r.rounds],
                "suffix_drafted": [round_.suffix_drafted for round_ in r.rounds],
                "accepted": [round_.accepted for round_ in r.rounds],
                "notices": list(r.notices),
            }
            for r, counted in [*((r, True) for r in runs), *((r, False) for r in uncounted)]
        ],
        classes=classes,
        interrupted=interrupted,
    )
