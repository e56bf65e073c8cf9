"""What a benchmark measures and in which order: drafts, γ settings, configurations, schedule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.bench.prompts import BenchPrompt
from app.engine.config import GenerationConfig, shown
from app.engine.gamma import OFF, GammaSetting, parse_gamma
from app.engine.token_tree_policy import TreeMode
from app.errors import InvalidSettingError
from app.llama.config import ModelConfig

ALL_CLASSES = "all"
PLAIN_LABEL = "plain"


@dataclass(frozen=True, slots=True)
class DraftChoice:
    """A draft to compare: a GGUF file, or the suffix index alone when `path` is None. A
    draft model drafts together with the suffix index unless `suffix` is False. `trees`: whether
    the suffix index alone may draft token trees (app/engine/token_tree_policy.py)."""

    label: str
    path: Path | None
    suffix: bool = True
    trees: TreeMode = "auto"

    @property
    def is_lookup(self) -> bool:
        return self.path is None

    @property
    def source(self) -> str:
        """The bench JSON's `source`: model, suffix or hybrid."""
        if self.path is None:
            return "suffix"
        return "hybrid" if self.suffix else "model"


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """One column of the comparison. Plain decoding has no draft and no γ."""

    label: str
    draft: DraftChoice | None
    gamma: GammaSetting

    @property
    def is_plain(self) -> bool:
        return self.draft is None


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """What a benchmark compares and how: every draft at every γ, on the prompts, each run
    from the base generation settings, `repeats` times, after an untimed warm-up run of each
    model unless `warmup` is False. draft_template carries the drafts' context, GPU-layer and
    thread settings (its path ignored)."""

    drafts: Sequence[DraftChoice]
    gammas: Sequence[GammaSetting]
    prompts: Sequence[BenchPrompt]
    base: GenerationConfig
    repeats: int = 1
    draft_template: ModelConfig | None = None
    warmup: bool = True

    def check(self) -> None:
        self.base.validate()
        check_drafts(self.drafts)
        if not self.prompts:
            raise InvalidSettingError("the benchmark needs at least one prompt")

    def configs(self) -> list[BenchConfig]:
        return plan_configs(self.drafts, self.gammas)


def parse_gammas(text: str) -> list[GammaSetting]:
    """`--gamma` value: one γ setting or several, comma-separated, such as `2,4,auto`. `off`
    is accepted as everywhere and is the plain column every benchmark has anyway."""
    out: list[GammaSetting] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        value = parse_gamma(item)
        if value not in out and not value.is_off:
            out.append(value)
    if not out:
        raise InvalidSettingError("--gamma needs at least one draft length or 'auto'")
    return out


def plan_configs(
    drafts: Sequence[DraftChoice], gammas: Sequence[GammaSetting]
) -> list[BenchConfig]:
    """Plain first, then every draft at every γ, in the order given."""
    configs = [BenchConfig(PLAIN_LABEL, None, OFF)]
    for draft in drafts:
        for gamma in gammas:
            configs.append(BenchConfig(f"{draft.label} γ={gamma}", draft, gamma))
    return configs


def check_drafts(drafts: Sequence[DraftChoice]) -> None:
    if not drafts:
        raise InvalidSettingError("the benchmark needs at least one --draft")
    labels = [d.label for d in drafts]
    if len(set(labels)) != len(labels):
        raise InvalidSettingError(f"draft labels must differ, got {labels}")
    if PLAIN_LABEL in labels:
        raise InvalidSettingError(f"a draft may not be labelled {PLAIN_LABEL!r}")


# Every prompt run this many times is hours of benchmark per prompt; past it a number is a typo,
# and the schedule below, built whole, would fill the memory before the first run.
MAX_REPEATS = 1000


def check_repeats(repeats: int) -> None:
    """--repeat as every bench takes it (InvalidSettingError otherwise)."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidSettingError(f"--repeat must be in 1..{MAX_REPEATS}, got {shown(repeats)}")


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


def repeat_note(repeat: int, repeats: int) -> str:
    """What a progress line says of the repeat it is in (0-based `repeat`): nothing when every
    prompt runs once, else ` · repeat i/N`, so a long bench shows how far it has come."""
    return f" · repeat {repeat + 1}/{repeats}" if repeats > 1 else ""


def generation_for(config: BenchConfig, base: GenerationConfig) -> GenerationConfig:
    """The GenerationConfig of one configuration: the base settings at its γ."""
    return replace(base, gamma=config.gamma)
