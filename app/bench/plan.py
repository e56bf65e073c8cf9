"""What a benchmark measures and in which order: drafts, γ settings, configurations, schedule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

from app.engine.config import GenerationConfig, check_gamma
from app.errors import InvalidSettingError
from app.metrics.cost_model import MAX_GAMMA

AUTO: Final = "auto"
GammaSetting = int | Literal["auto"]
ALL_CLASSES = "all"
PLAIN_LABEL = "plain"


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


def check_drafts(drafts: Sequence[DraftChoice]) -> None:
    if not drafts:
        raise InvalidSettingError("the benchmark needs at least one --draft")
    labels = [d.label for d in drafts]
    if len(set(labels)) != len(labels):
        raise InvalidSettingError(f"draft labels must differ, got {labels}")
    if PLAIN_LABEL in labels:
        raise InvalidSettingError(f"a draft may not be labelled {PLAIN_LABEL!r}")


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


def generation_for(config: BenchConfig, base: GenerationConfig) -> GenerationConfig:
    """The GenerationConfig of one configuration; base.gamma is auto's starting γ."""
    if config.gamma is None or config.gamma == AUTO:
        return replace(base, adaptive=config.gamma == AUTO)
    return replace(base, gamma=int(config.gamma), adaptive=False)
