"""Split models (`name-0000K-of-0000N.gguf`) and where a model's tensor bytes sit."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelLoadError
from models.gguf.scan import HeaderRejectedError, HeaderScan, scan_header
from models.gguf.vetting import MAX_LAYERS

__all__ = [
    "ByteSplit",
    "TensorRow",
    "is_shard_path",
    "other_parts",
    "part_paths",
    "shard_info",
    "split_bytes",
    "tensor_rows",
]


_SHARD_SUFFIX_LEN = len("-00001-of-00002.gguf")


def shard_info(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(part, count) for `name-0000K-of-0000N.gguf` split files, else None."""
    name = Path(path).name
    if len(name) <= _SHARD_SUFFIX_LEN or not name.lower().endswith(".gguf"):
        return None
    tail = name[-_SHARD_SUFFIX_LEN : -len(".gguf")]  # "-00001-of-00002"
    if tail[0] != "-" or tail[6:10] != "-of-":
        return None
    part, count = tail[1:6], tail[10:]
    if not (part.isdigit() and count.isdigit()):
        return None
    return int(part), int(count)


def is_shard_path(path: str | os.PathLike[str]) -> bool:
    return shard_info(path) is not None


TensorRow = tuple[str, int, int]  # name, elements, bytes


def tensor_rows(scan: HeaderScan) -> list[TensorRow]:
    return [(t.name, t.n_elements, t.n_bytes) for t in scan.tensors]


def part_paths(first: Path) -> list[Path]:
    """Parts 2..N of the split model whose part 1 is `first`, as its name spells them; [] for a
    file not named as part 1 of several."""
    parts = shard_info(first)
    if parts is None or parts[0] != 1:
        return []
    count = parts[1]
    stem = first.name[:-_SHARD_SUFFIX_LEN]
    return [first.with_name(f"{stem}-{k:05d}-of-{count:05d}.gguf") for k in range(2, count + 1)]


def other_parts(first: Path, count: int) -> tuple[list[TensorRow], int]:
    """Tensors and bytes on disk of parts 2..count of a split model; a missing part raises."""
    parts = shard_info(first)
    if parts is not None and parts[0] != 1 and parts[1] == count:
        stem = first.name[:-_SHARD_SUFFIX_LEN]
        raise ModelLoadError(
            str(first),
            f"part {parts[0]} of a split model of {count} parts; open part 1 "
            f"({stem}-00001-of-{count:05d}.gguf), which brings the others",
        )
    if parts is None or parts[0] != 1 or parts[1] != count:
        raise ModelLoadError(
            str(first), f"split model of {count} parts, but the file is not named as part 1"
        )
    rows: list[TensorRow] = []
    size = 0
    for k, sibling in enumerate(part_paths(first), start=2):
        try:
            st = sibling.stat()
        except OSError:
            raise ModelLoadError(
                str(first), f"part {k} of {count} is missing ({sibling.name})"
            ) from None
        if not stat.S_ISREG(st.st_mode) or st.st_size < 8:
            raise ModelLoadError(str(first), f"part {k} of {count} is not a GGUF file")
        try:
            part = scan_header(sibling, int(st.st_size))
        except HeaderRejectedError as exc:
            raise ModelLoadError(str(first), f"part {k} of {count}: {exc}") from None
        except Exception as exc:  # a broken part makes the whole model unusable
            raise ModelLoadError(str(first), f"part {k} of {count} is unreadable ({exc})") from None
        rows.extend(tensor_rows(part))
        size += int(st.st_size)
    return rows, size


@dataclass(frozen=True)
class ByteSplit:
    layers: tuple[int, ...]
    embedding: int
    output: int
    other: int
    tied: bool


def split_bytes(rows: list[TensorRow], n_layers: int | None) -> ByteSplit:
    """Tensor bytes per repeating layer ("blk.N."), token embeddings, output head, the rest."""
    layers = [0] * min(n_layers or 0, MAX_LAYERS)
    embedding = output = other = 0
    has_output_matrix = False
    for name, _elements, n_bytes in rows:
        if name.startswith("blk."):
            index_text = name[4:].split(".", 1)[0]
            if index_text.isdigit() and int(index_text) < len(layers):
                layers[int(index_text)] += n_bytes
                continue
        if name == "token_embd.weight":
            embedding += n_bytes
        elif name.startswith("output"):  # output.weight, output_norm.weight
            output += n_bytes
            has_output_matrix = has_output_matrix or name == "output.weight"
        else:
            other += n_bytes
    return ByteSplit(tuple(layers), embedding, output, other, not has_output_matrix)
