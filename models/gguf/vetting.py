"""Shape numbers llama.cpp cannot survive, refused from the header before any load.

llama.cpp aborts the whole process (not an error return) on some header values: a layer count of
0 or beyond its fixed per-layer arrays, head counts that do not divide, per-layer arrays of the
wrong length. `vet_shape(scan)` raises `HeaderRejectedError` with the rule in words for those; the
softer verdicts (no vocabulary, an unknown tokenizer, an adapter) are `GGUFInfo.problem`.
"""

from __future__ import annotations

from models.gguf.scan import HeaderRejectedError, HeaderScan

__all__ = ["MAX_EMBEDDING", "MAX_LAYERS", "vet_shape"]

MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS: per-layer hyperparameters live in fixed arrays
MAX_EMBEDDING = 1 << 20  # far beyond any model; keeps head-size arithmetic away from overflow


def _int(scan: HeaderScan, key: str) -> int | None:
    value = scan.scalars.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _check_range(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise HeaderRejectedError(f"{name} {value} is out of range ({low} to {high})")


def vet_shape(scan: HeaderScan) -> None:
    """Raise HeaderRejectedError when the header's shape numbers would make llama.cpp abort."""
    arch_value = scan.scalars.get("general.architecture")
    if not isinstance(arch_value, str):
        return  # llama.cpp refuses a file without an architecture with a plain error
    arch = arch_value

    if f"{arch}.block_count" in scan.array_lengths:
        raise HeaderRejectedError("the layer count (block_count) is an array, not a number")
    n_layers = _int(scan, f"{arch}.block_count")
    _check_range("layer count (block_count)", n_layers, 1, MAX_LAYERS)

    n_embd = _int(scan, f"{arch}.embedding_length")
    _check_range("embedding length", n_embd, 1, MAX_EMBEDDING)

    for suffix in ("attention.head_count", "attention.head_count_kv"):
        length = scan.array_lengths.get(f"{arch}.{suffix}")
        if length is not None and length != (n_layers or 0):
            raise HeaderRejectedError(
                f"{suffix} lists {length} layers but the model has {n_layers or 0}"
            )
    n_head = _int(scan, f"{arch}.attention.head_count")
    n_head_kv = _int(scan, f"{arch}.attention.head_count_kv")
    _check_range("head count", n_head, 0, n_embd or MAX_EMBEDDING)
    _check_range("key/value head count", n_head_kv, 0, MAX_EMBEDDING if n_head is None else n_head)
    if n_head and n_head_kv and n_head % n_head_kv:
        raise HeaderRejectedError(
            f"head count {n_head} is not a multiple of the key/value head count {n_head_kv}"
        )
