"""Which configurations `specchat bench` compares: each `--draft` as a DraftChoice, once per
`--suffix` mode for a draft model and once per `--trees` mode for the suffix index alone,
labelled so that no two read alike in the table."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from app.bench.plan import DraftChoice
from app.cli.args import DEMO, DRAFT_SUFFIX, resolve_model_path
from app.cli.bench_checks import DEMO_PRUNED, is_suffix_draft
from app.engine.token_tree_policy import TREE_MODES, TreeMode

__all__ = [
    "draft_choice",
    "suffix_modes",
    "tree_modes",
    "unique_labels",
    "with_suffix_modes",
    "with_tree_modes",
]


def _listed(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def suffix_modes(value: str) -> list[bool]:
    modes = _listed(value)
    if not modes or any(m not in ("on", "off") for m in modes):
        raise argparse.ArgumentTypeError(f"--suffix takes on, off or on,off, got {value!r}")
    return [m == "on" for m in dict.fromkeys(modes)]


def with_suffix_modes(choices: list[DraftChoice], modes: list[bool]) -> list[DraftChoice]:
    """Each draft model once per --suffix mode; the suffix index alone has no mode."""
    out: list[DraftChoice] = []
    for choice in choices:
        if choice.path is None:
            out.append(choice)
            continue
        for joined in modes:
            label = f"{choice.label}+suffix" if joined and len(modes) > 1 else choice.label
            out.append(replace(choice, label=label, suffix=joined))
    return out


def tree_modes(value: str) -> list[TreeMode]:
    modes = _listed(value)
    if not modes or any(m not in TREE_MODES for m in modes):
        raise argparse.ArgumentTypeError(f"--trees takes auto, on, off or a list, got {value!r}")
    return [m for m in TREE_MODES if m in modes]


def with_tree_modes(choices: list[DraftChoice], modes: list[TreeMode]) -> list[DraftChoice]:
    """The suffix index alone once per --trees mode; draft models have no trees."""
    out: list[DraftChoice] = []
    for choice in choices:
        if choice.path is not None:
            out.append(choice)
            continue
        for mode in modes:
            label = f"{choice.label} trees {mode}" if len(modes) > 1 else choice.label
            out.append(replace(choice, label=label, trees=mode))
    return out


def draft_choice(value: str) -> DraftChoice:
    if is_suffix_draft(value):
        return DraftChoice(DRAFT_SUFFIX, None)
    if value == DEMO_PRUNED:
        from models.prune import useless_demo_draft  # noqa: PLC0415

        return DraftChoice("demo pruned", useless_demo_draft())
    if value == DEMO:
        return DraftChoice("demo Q4_1", Path(resolve_model_path(value, role="draft")))
    path = Path(value)
    return DraftChoice(path.stem, path)


def unique_labels(choices: list[DraftChoice]) -> list[DraftChoice]:
    seen: dict[str, int] = {}
    out: list[DraftChoice] = []
    for choice in choices:
        count = seen.get(choice.label, 0) + 1
        seen[choice.label] = count
        label = choice.label if count == 1 else f"{choice.label}#{count}"
        out.append(replace(choice, label=label))
    return out
