"""Who drafted the tokens a reply kept, in the words every front end uses (the window's stats
line and shading legend, `specchat generate`'s summary line)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.store import TokenSource

# Each source with its GenerationStats count of accepted tokens.
SOURCE_WORDS = {TokenSource.DRAFT: "draft model", TokenSource.SUFFIX: "chat history"}
SOURCE_COUNTS = {TokenSource.DRAFT: "model_accepted", TokenSource.SUFFIX: "suffix_accepted"}


def accepted_by_source(stats: Mapping[str, Any]) -> str:
    """ "accepted 30 draft model + 12 chat history": both when both sources drafted (the
    hybrid), else the one that did; "" for replies stored before the counts were kept.
    `stats` holds GenerationStats' fields and the reply's mode."""
    counts = {source: stats.get(key) for source, key in SOURCE_COUNTS.items()}
    if all(count is None for count in counts.values()):
        return ""
    both = stats.get("mode") == "hybrid"
    shown = [f"{count or 0} {SOURCE_WORDS[s]}" for s, count in counts.items() if count or both]
    return "accepted " + " + ".join(shown) if shown else ""
