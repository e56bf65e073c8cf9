"""Telling apart model files whose labels read alike: copies of one file in two folders (the
Hugging Face cache and LM Studio's, say) have the same name, size and type."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath


def telling_folders(labels: Sequence[str], paths: Sequence[str]) -> list[str | None]:
    """Per file, None where its label is unique, else the fewest trailing folders of its path
    that no other file of the same label shares (nearest first, "a/b")."""
    folders: list[str | None] = [None] * len(labels)
    for label in set(labels):
        rows = [row for row, other in enumerate(labels) if other == label]
        if len(rows) < 2:
            continue
        parts = [PurePath(paths[row]).parent.parts for row in rows]
        depth = 1
        while depth < max(map(len, parts)) and len({p[-depth:] for p in parts}) < len(rows):
            depth += 1
        for row, part in zip(rows, parts, strict=True):
            folders[row] = "/".join(part[-depth:]).lstrip("/") or "/"
    return folders
