"""The one GGUF header reader: a bounded walk over the key/value section and the tensor table.

`scan_header(path, size)` reads the header with hard caps (keys, array lengths, string sizes,
tensors, dimensions), and checks the tensor table against the header the way llama.cpp's loader
does (known tensor types, sizes that fit, aligned offsets inside the file, unique names). It raises
`HeaderRejectedError` with the reason in words at the first problem, so a hostile file costs at
most a few seconds and a bounded amount of memory. A file that passes comes back as a `HeaderScan`:
every scalar value, every array of numbers, the vocabulary's token texts and the tensor table,
all a model's description is built from (models/gguf/build.py). Arrays of strings other than the
vocabulary (merges) are walked for the caps and not kept.

The caps sit far above any real model (the largest vocabularies hold ~260k tokens and ~500k
merges; the largest models a few thousand tensors) and far below what would take a desktop down.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from models.gguf.tokens import TokenTable

__all__ = [
    "MAX_ARRAY_ITEMS",
    "MAX_KEYS",
    "MAX_STRING_BYTES",
    "MAX_TENSORS",
    "HeaderRejectedError",
    "HeaderScan",
    "TensorEntry",
    "scan_header",
]

MAX_KEYS = 16_384
MAX_TENSORS = 65_536
MAX_ARRAY_ITEMS = 4_000_000  # one array
MAX_TOTAL_ARRAY_ITEMS = 12_000_000  # all arrays of one file together
# Strings in all arrays together: each is walked one by one (real files: tokens + merges, under
# 800k). Numbers are read as one block, hence their larger cap.
MAX_STRING_ITEMS = 2_000_000
MAX_STRING_BYTES = 64 * 1024 * 1024  # one string value (chat templates are tens of KB)
MAX_KEY_BYTES = 65_536
MAX_TENSOR_NAME_BYTES = 63  # llama.cpp's GGML_MAX_NAME, less the terminating NUL
MAX_DIMS = 4  # GGML_MAX_DIMS
_INT64_MAX = 2**63 - 1
DEFAULT_ALIGNMENT = 32

# GGUF value types: fixed-size ones by struct code; 8 = string, 9 = array.
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_U32 = 4
_STRING = 8
_ARRAY = 9
_TOKENS_KEY = "tokenizer.ggml.tokens"
_ALIGNMENT_KEY = "general.alignment"

Scalar = int | float | str | bool


class HeaderRejectedError(Exception):
    """The header breaks a cap or does not describe the file it sits in; str() is the reason."""


@dataclass(frozen=True)
class TensorEntry:
    name: str
    n_dims: int
    type_id: int  # a GGMLQuantizationType
    n_elements: int
    n_bytes: int


@dataclass
class HeaderScan:
    version: int
    n_tensors: int
    n_keys: int
    scalars: dict[str, Scalar] = field(default_factory=dict)  # strings with bad UTF-8 replaced
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # every array of numbers
    array_lengths: dict[str, int] = field(default_factory=dict)  # every array, strings' too
    tokens: TokenTable = field(default_factory=TokenTable)  # when the vocabulary is strings
    tensors: list[TensorEntry] = field(default_factory=list)
    data_offset: int = 0


class _Cursor:
    def __init__(self, buf: mmap.mmap, size: int, order: str) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0
        self.order = order
        self.items_left = MAX_TOTAL_ARRAY_ITEMS
        self.strings_left = MAX_STRING_ITEMS

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise HeaderRejectedError(
                f"file is truncated ({what} needs {self.pos + n} bytes, has {self.size})"
            )

    def fixed(self, code: str, what: str) -> int | float | bool:
        width = struct.calcsize(code)
        self.need(width, what)
        (value,) = struct.unpack_from(self.order + code, self.buf, self.pos)
        self.pos += width
        return value  # type: ignore[no-any-return]

    def u32(self, what: str) -> int:
        return int(self.fixed("I", what))

    def u64(self, what: str) -> int:
        return int(self.fixed("Q", what))

    def string(self, what: str, limit: int) -> bytes:
        length = self.u64(what)
        if length > limit:
            raise HeaderRejectedError(f"{what} is {length} bytes long (limit {limit})")
        self.need(length, what)
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        return raw

    def skip_string(self, what: str) -> None:
        length = self.u64(what)
        if length > MAX_STRING_BYTES:
            raise HeaderRejectedError(f"{what} is {length} bytes long (limit {MAX_STRING_BYTES})")
        self.need(length, what)
        self.pos += length


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _name(raw: bytes, what: str) -> str:
    """A key or tensor name: UTF-8 text, as the `gguf` package and llama.cpp's tools write it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderRejectedError(f"{what} {_shown(_text(raw))} is not UTF-8 text") from None


def _shown(key: str) -> str:
    printable = "".join(ch if ch.isprintable() else "?" for ch in key[:60])
    return printable + ("…" if len(key) > 60 else "")


def _value(cur: _Cursor, vtype: int, key: str, scan: HeaderScan) -> None:
    """Read one value into `scan` (string arrays other than the vocabulary: only walked)."""
    what = f"value of {_shown(key)}"
    if vtype in _FIXED:
        scan.scalars[key] = cur.fixed(_FIXED[vtype], what)
        return
    if vtype == _STRING:
        scan.scalars[key] = _text(cur.string(what, MAX_STRING_BYTES))
        return
    if vtype != _ARRAY:
        raise HeaderRejectedError(f"key {_shown(key)} has unknown value type {vtype}")
    item_type = cur.u32(what)
    count = cur.u64(what)
    if item_type == _ARRAY:
        raise HeaderRejectedError(
            f"key {_shown(key)} holds nested arrays (not supported by llama.cpp)"
        )
    if count > MAX_ARRAY_ITEMS:
        raise HeaderRejectedError(
            f"array {_shown(key)} has {count} items (limit {MAX_ARRAY_ITEMS:,})".replace(",", " ")
        )
    cur.items_left -= count
    if cur.items_left < 0:
        raise HeaderRejectedError(
            f"arrays hold more than {MAX_TOTAL_ARRAY_ITEMS:,} items in all".replace(",", " ")
        )
    if item_type in _FIXED:
        code = _FIXED[item_type]
        nbytes = struct.calcsize(code) * count
        cur.need(nbytes, what)
        dtype = np.dtype(cur.order + code)
        scan.arrays[key] = np.frombuffer(cur.buf, dtype, count, cur.pos).copy()
        cur.pos += nbytes
    elif item_type == _STRING:
        cur.strings_left -= count
        if cur.strings_left < 0:
            raise HeaderRejectedError(
                f"string arrays hold more than {MAX_STRING_ITEMS:,} items".replace(",", " ")
            )
        if key == _TOKENS_KEY:
            scan.tokens = TokenTable([cur.string(what, MAX_STRING_BYTES) for _ in range(count)])
        else:
            for _ in range(count):
                cur.skip_string(what)
    else:
        raise HeaderRejectedError(f"array {_shown(key)} has unknown item type {item_type}")
    scan.array_lengths[key] = count


def _tensor_size(name: str, dims: list[int], type_id: int) -> tuple[int, int]:
    """(elements, bytes) of a tensor; refuses types and shapes llama.cpp cannot hold."""
    try:
        qtype = GGMLQuantizationType(type_id)
        block, type_size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise HeaderRejectedError(f"tensor {name} has unknown type {type_id}") from None
    total = 1
    for dim in dims:
        total *= dim
        if total > _INT64_MAX:
            raise HeaderRejectedError(
                f"tensor {name} is impossibly large ({' x '.join(map(str, dims))})"
            )
    if dims and dims[0] % block:
        raise HeaderRejectedError(
            f"tensor {name}: row of {dims[0]} is not a multiple of its block size {block}"
        )
    return total, total // block * type_size


def scan_header(path: Path, size: int) -> HeaderScan:
    """Walk the header of the regular file `path` (`size` bytes, at least 8) within the caps."""
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        size = min(size, len(buf))
        little = struct.unpack_from("<I", buf, 4)[0]
        order = "<" if little in (2, 3) else ">"
        cur = _Cursor(buf, size, order)
        cur.pos = 4
        version = cur.u32("header")
        n_tensors = cur.u64("header")
        n_keys = cur.u64("header")
        if n_keys > MAX_KEYS:
            raise HeaderRejectedError(f"header claims {n_keys} metadata keys (limit {MAX_KEYS})")
        if n_tensors > MAX_TENSORS:
            raise HeaderRejectedError(f"header claims {n_tensors} tensors (limit {MAX_TENSORS})")
        scan = HeaderScan(version, n_tensors, n_keys)
        seen: set[bytes] = set()
        for _ in range(n_keys):
            raw_key = cur.string("a metadata key", MAX_KEY_BYTES)
            if raw_key in seen:
                raise HeaderRejectedError(f"metadata key {_shown(_text(raw_key))} appears twice")
            seen.add(raw_key)
            key = _name(raw_key, "metadata key")
            vtype = cur.u32(f"type of {_shown(key)}")
            if key == _ALIGNMENT_KEY and vtype != _U32:
                # llama.cpp reads it with gguf_get_val_u32, which aborts on any other type.
                raise HeaderRejectedError(f"{_ALIGNMENT_KEY} is not a 32-bit unsigned number")
            _value(cur, vtype, key, scan)
        _scan_tensors(cur, scan)
        return scan


def _alignment(scan: HeaderScan) -> int:
    value = scan.scalars.get(_ALIGNMENT_KEY, DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise HeaderRejectedError(f"{_ALIGNMENT_KEY} {value!r} is not a power of two")
    return value


def _scan_tensors(cur: _Cursor, scan: HeaderScan) -> None:
    names: set[bytes] = set()
    spans: list[tuple[int, int, str]] = []
    for index in range(scan.n_tensors):
        raw_name = cur.string(f"name of tensor {index}", MAX_KEY_BYTES)
        full_name = _name(raw_name, "tensor name")
        name = _shown(full_name)
        if len(raw_name) > MAX_TENSOR_NAME_BYTES:
            raise HeaderRejectedError(
                f"tensor name {name} is longer than {MAX_TENSOR_NAME_BYTES} bytes"
            )
        if raw_name in names:
            raise HeaderRejectedError(f"tensor {name} appears twice")
        names.add(raw_name)
        n_dims = cur.u32(f"tensor {name}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise HeaderRejectedError(f"tensor {name} has {n_dims} dimensions (1 to {MAX_DIMS})")
        dims = [cur.u64(f"tensor {name}") for _ in range(n_dims)]
        if any(d > _INT64_MAX for d in dims):
            raise HeaderRejectedError(f"tensor {name} has a negative dimension")
        type_id = cur.u32(f"tensor {name}")
        offset = cur.u64(f"tensor {name}")
        elements, nbytes = _tensor_size(name, dims, type_id)
        spans.append((offset, nbytes, name))
        scan.tensors.append(TensorEntry(full_name, n_dims, type_id, elements, nbytes))
    alignment = _alignment(scan)
    data_start = -(-cur.pos // alignment) * alignment
    scan.data_offset = data_start
    data_size = cur.size - data_start
    expected = 0
    for offset, nbytes, name in spans:
        # llama.cpp requires the tensors back to back, each padded to the alignment.
        if offset != expected:
            raise HeaderRejectedError(f"tensor {name} has offset {offset}, expected {expected}")
        if offset + nbytes > data_size:
            raise HeaderRejectedError(
                f"file is truncated (tensor {name} needs bytes up to "
                f"{data_start + offset + nbytes}, the file has {cur.size})"
            )
        expected += -(-nbytes // alignment) * alignment
