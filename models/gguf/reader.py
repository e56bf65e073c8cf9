"""Typed reads of a scanned header's values (models/gguf/scan.py), as a model's description
needs them: a missing key or a value of the wrong kind reads as None."""

from __future__ import annotations

from typing import Any

from gguf import GGMLQuantizationType, LlamaFileType

from models.gguf.scan import HeaderScan

__all__ = ["quantization_name", "read_bool", "read_int", "read_str"]


def _value(scan: HeaderScan, key: str) -> Any:
    if key in scan.arrays:
        return scan.arrays[key].tolist()
    return scan.scalars.get(key)


def read_int(scan: HeaderScan, key: str) -> int | None:
    value = _value(scan, key)
    if isinstance(value, list):  # per-layer values (some architectures): report the largest
        numbers = [int(v) for v in value if isinstance(v, int | float)]
        return max(numbers) if numbers else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def read_str(scan: HeaderScan, key: str) -> str | None:
    value = scan.scalars.get(key)
    return value if isinstance(value, str) else None


def read_bool(scan: HeaderScan, key: str) -> bool | None:
    value = scan.scalars.get(key)
    return bool(value) if isinstance(value, bool | int) else None


def quantization_name(file_type: int | None, scan: HeaderScan) -> str:
    if file_type is not None:
        try:
            name = LlamaFileType(file_type).name
        except ValueError:
            name = ""
        if name and name != "GUESSED":
            for prefix in ("MOSTLY_", "ALL_"):
                if name.startswith(prefix):
                    return name[len(prefix) :]
            return name
    # Fall back to the tensor type holding the most bytes among matrices (biases/norms are F32).
    totals: dict[str, int] = {}
    for tensor in scan.tensors:
        if tensor.n_dims < 2:
            continue
        type_name = GGMLQuantizationType(tensor.type_id).name
        totals[type_name] = totals.get(type_name, 0) + tensor.n_bytes
    if not totals:
        return "unknown"
    return max(totals.items(), key=lambda item: item[1])[0]
