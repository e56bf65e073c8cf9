"""Read what a GGUF file is from its header alone: no weights are loaded, the file is memory-mapped.

`inspect_gguf(path)` returns a frozen `GGUFInfo` (architecture, size, quantization, shape numbers,
the tokenizer and its fingerprint, the chat template) or raises `ModelLoadError` whose reason is a
few plain words ("file is empty", "not a GGUF file (bad magic)", "file is truncated ..."). No other
exception type escapes, whatever the bytes on disk. Results are cached by (path, size, mtime), so a
rescan of an unchanged folder costs a few `stat` calls.

The parser is the `gguf` package's `GGUFReader` with two private hooks overridden (see
`_HeaderReader`): a bounds check so that a short file reads as "truncated" rather than as a numpy
error, and a fast path for long arrays (token lists, merges) that the stock reader walks element by
element (12 s for Gemma's 262k tokens on a small CPU; under half a second here). If a future `gguf`
release changes those private hooks, the stock reader is used unchanged: slower, still correct.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect as _pyinspect
import os
import stat
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, overload

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, LlamaFileType

from app.errors import ModelLoadError

__all__ = [
    "GGUFInfo",
    "TokenTable",
    "clear_inspect_cache",
    "inspect_gguf",
    "is_shard_path",
    "shard_info",
    "tokenizer_fingerprint",
]

GGUF_MAGIC = b"GGUF"
_SUPPORTED_VERSIONS = (2, 3)
_CACHE_LIMIT = 128

# llama.cpp's defaults when a file omits the special-token keys (src/llama-vocab.cpp, `load`):
# tokenizer model -> (vocab type name, default BOS id, default EOS id, default add_bos, add_eos).
_VOCAB_DEFAULTS: dict[str, tuple[int | None, int | None, bool, bool]] = {
    "llama": (1, 2, True, False),  # SPM
    "bert": (101, None, True, False),  # WPM
    "gpt2": (11, 11, False, False),  # BPE (some pre-tokenizers switch add_bos on, below)
    "t5": (None, 1, False, True),  # UGM
    "rwkv": (None, None, False, False),
    "plamo2": (1, 2, False, False),
}
# BPE pre-tokenizers for which llama.cpp turns add_bos on by default.
_BPE_PRE_ADD_BOS = frozenset(
    {
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "tekken",
        "chameleon",
    }
)


class TokenTable(Sequence[str]):
    """The vocabulary's token texts, stored compactly (one bytes blob plus offsets).

    Indexing gives `str` (invalid UTF-8 kept via surrogateescape, so text compares exactly like
    the raw bytes llama.cpp compares with strcmp); `raw(i)` gives the bytes.
    """

    __slots__ = ("_blob", "_ends")

    def __init__(self, texts: Sequence[bytes] = ()) -> None:
        self._blob = b"".join(texts)
        ends = array("Q")
        total = 0
        for text in texts:
            total += len(text)
            ends.append(total)
        self._ends = ends

    def __len__(self) -> int:
        return len(self._ends)

    def _span(self, index: int) -> tuple[int, int]:
        n = len(self._ends)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("token id out of range")
        start = self._ends[index - 1] if index > 0 else 0
        return start, self._ends[index]

    def raw(self, index: int) -> bytes:
        start, end = self._span(index)
        return self._blob[start:end]

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.raw(index).decode("utf-8", errors="surrogateescape")

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self)):
            yield self[i]

    def first_difference(self, other: TokenTable, start: int, stop: int) -> int | None:
        """The first id in [start, stop) whose text differs between the two tables, or None."""
        stop = min(stop, len(self), len(other))
        if start >= stop:
            return None
        a0 = self._span(start)[0]
        b0 = other._span(start)[0]
        a1 = self._ends[stop - 1]
        b1 = other._ends[stop - 1]
        # Fast path: identical bytes and identical token boundaries mean identical texts.
        if self._blob[a0:a1] == other._blob[b0:b1]:
            mine = np.frombuffer(self._ends, dtype=np.uint64)[start:stop] - np.uint64(a0)
            theirs = np.frombuffer(other._ends, dtype=np.uint64)[start:stop] - np.uint64(b0)
            if np.array_equal(mine, theirs):
                return None
        for i in range(start, stop):
            if self.raw(i) != other.raw(i):
                return i
        return None

    def digest_into(self, hasher: Any) -> None:
        hasher.update(len(self).to_bytes(8, "little"))
        hasher.update(self._ends.tobytes())
        hasher.update(self._blob)

    def __repr__(self) -> str:
        return f"TokenTable({len(self)} tokens)"


@dataclass(frozen=True)
class GGUFInfo:
    """What a GGUF file holds, read from its header. `tokens` is kept out of repr and equality."""

    path: Path
    size_bytes: int  # this file
    total_size_bytes: int  # all parts of a split model (= size_bytes for a single file)
    mtime: float
    gguf_version: int
    architecture: str
    name: str
    kind: str  # "model", "adapter", "mmproj" (vision projector) or another general.type
    size_label: str | None
    parameter_count: int
    tensor_count: int
    quantization: str  # "Q4_1", "F32", "Q4_K_M", ...
    file_type: int | None
    context_length: int | None
    n_layers: int | None
    n_embd: int | None
    n_head: int | None
    n_head_kv: int | None
    head_dim_k: int | None
    head_dim_v: int | None
    vocab_type: str | None  # tokenizer.ggml.model: "llama" (SPM), "gpt2" (BPE), "t5", "bert", ...
    tokenizer_pre: str | None
    vocab_size: int
    bos_token_id: int | None
    eos_token_id: int | None
    add_bos: bool
    add_eos: bool
    tokenizer_fingerprint: str
    shard_count: int
    chat_template: str | None = field(default=None, repr=False)
    # Tensor bytes per repeating layer, token embeddings, output head (output.weight and its
    # norm) and the rest: what a GPU offload of N layers moves (see models.memory).
    # tied_embeddings: no output.weight, the output head reuses the token embeddings.
    layer_bytes: tuple[int, ...] = field(default=(), repr=False)
    embedding_bytes: int = field(default=0, repr=False)
    output_bytes: int = field(default=0, repr=False)
    other_tensor_bytes: int = field(default=0, repr=False)
    tied_embeddings: bool = field(default=False, repr=False)
    tokens: TokenTable = field(default_factory=TokenTable, repr=False, compare=False)

    @property
    def tensor_bytes(self) -> int:
        head = self.embedding_bytes + self.output_bytes + self.other_tensor_bytes
        return sum(self.layer_bytes) + head

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def has_vocab(self) -> bool:
        return self.vocab_size > 0 and self.vocab_type not in (None, "none", "no_vocab")

    @property
    def is_model(self) -> bool:
        """A loadable language model (not a LoRA adapter or a vision projector)."""
        return self.kind == "model" and self.has_vocab and self.n_layers is not None

    def to_dict(self, *, include_template: bool = False) -> dict[str, Any]:
        """JSON-ready summary (never the token list)."""
        out: dict[str, Any] = {
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "total_size_bytes": self.total_size_bytes,
            "gguf_version": self.gguf_version,
            "architecture": self.architecture,
            "name": self.name,
            "kind": self.kind,
            "size_label": self.size_label,
            "parameter_count": self.parameter_count,
            "tensor_count": self.tensor_count,
            "quantization": self.quantization,
            "file_type": self.file_type,
            "context_length": self.context_length,
            "n_layers": self.n_layers,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_head_kv": self.n_head_kv,
            "head_dim_k": self.head_dim_k,
            "head_dim_v": self.head_dim_v,
            "vocab_type": self.vocab_type,
            "tokenizer_pre": self.tokenizer_pre,
            "vocab_size": self.vocab_size,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "shard_count": self.shard_count,
            "has_chat_template": self.has_chat_template,
        }
        if include_template:
            out["chat_template"] = self.chat_template
        return out


# --------------------------------------------------------------------------------------------
# Reader


class _TruncatedError(Exception):
    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class _HeaderReader(GGUFReader):
    """GGUFReader that reports reads past the end, and parses long arrays in one pass."""

    def _get(
        self,
        offset: int,
        dtype: Any,
        count: int = 1,
        override_order: Any = None,
    ) -> Any:
        count = int(count)
        end = int(offset) + int(np.dtype(dtype).itemsize) * count
        if offset < 0 or count < 0 or end > int(self.data.shape[0]):
            raise _TruncatedError(end)
        return super()._get(offset, dtype, count, override_order)

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> Any:
        if raw_type != GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        raw_itype = self._get(orig_offs, np.uint32)
        alen = self._get(orig_offs + 4, np.uint64)
        count = int(alen[0])
        item_type = GGUFValueType(int(raw_itype[0]))
        offs = orig_offs + 12
        if count == 0:
            return 12, [raw_itype, alen], [], [GGUFValueType.ARRAY]
        np_type = self.gguf_scalar_to_np.get(item_type)
        if np_type is not None:
            # One view for the whole array: `ReaderField.contents()` flattens it the same way.
            values = self._get(offs, np_type, count)
            return (
                12 + int(values.nbytes),
                [raw_itype, alen, values],
                [2],
                [
                    GGUFValueType.ARRAY,
                    item_type,
                ],
            )
        if item_type == GGUFValueType.STRING:
            little = (sys.byteorder == "little") == (self.byte_order == "I")
            fmt = "<Q" if little else ">Q"
            view = memoryview(cast(Any, self.data))
            size = len(view)
            unpack = struct.unpack_from
            parts: list[Any] = [raw_itype, alen]
            for _ in range(count):
                if offs + 8 > size:
                    raise _TruncatedError(offs + 8)
                (length,) = unpack(fmt, view, offs)
                offs += 8
                if offs + length > size:
                    raise _TruncatedError(offs + length)
                # memoryview slices have .tobytes() and .nbytes like the numpy parts they replace.
                parts.append(view[offs : offs + length])
                offs += length
            return (
                offs - orig_offs,
                parts,
                list(range(2, count + 2)),
                [
                    GGUFValueType.ARRAY,
                    GGUFValueType.STRING,
                ],
            )
        return super()._get_field_parts(orig_offs, raw_type)


def _hooks_match() -> bool:
    """True when the private GGUFReader methods we override still have the shape we expect."""
    try:
        get_params = list(_pyinspect.signature(GGUFReader._get).parameters)
        parts_params = list(_pyinspect.signature(GGUFReader._get_field_parts).parameters)
    except (AttributeError, TypeError, ValueError):
        return False
    return get_params[:4] == ["self", "offset", "dtype", "count"] and parts_params == [
        "self",
        "orig_offs",
        "raw_type",
    ]


_READER_CLASS: type[GGUFReader] = _HeaderReader if _hooks_match() else GGUFReader


# --------------------------------------------------------------------------------------------
# Field access helpers


def _scalar(reader: GGUFReader, key: str) -> Any:
    fld = reader.fields.get(key)
    if fld is None or not fld.types:
        return None
    main = fld.types[0]
    if main == GGUFValueType.STRING:
        return bytes(fld.parts[-1]).decode("utf-8", errors="replace")
    if main == GGUFValueType.ARRAY:
        return _array(reader, key)
    value = fld.parts[-1].tolist()
    return value[0] if isinstance(value, list) else value


def _array(reader: GGUFReader, key: str) -> list[Any] | None:
    fld = reader.fields.get(key)
    if fld is None or not fld.types or fld.types[0] != GGUFValueType.ARRAY:
        return None
    if len(fld.types) > 1 and fld.types[-1] == GGUFValueType.STRING:
        return [bytes(fld.parts[i]).decode("utf-8", errors="replace") for i in fld.data]
    out: list[Any] = []
    for i in fld.data:
        out.extend(np.asarray(fld.parts[i]).tolist())
    return out


def _int(reader: GGUFReader, key: str) -> int | None:
    value = _scalar(reader, key)
    if isinstance(value, list):  # per-layer values (some architectures): report the largest
        numbers = [int(v) for v in value if isinstance(v, int | float)]
        return max(numbers) if numbers else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _str(reader: GGUFReader, key: str) -> str | None:
    value = _scalar(reader, key)
    return value if isinstance(value, str) else None


def _bool(reader: GGUFReader, key: str) -> bool | None:
    value = _scalar(reader, key)
    return bool(value) if isinstance(value, bool | int) else None


def _token_texts(reader: GGUFReader) -> TokenTable:
    fld = reader.fields.get("tokenizer.ggml.tokens")
    if fld is None or not fld.types or fld.types[0] != GGUFValueType.ARRAY:
        return TokenTable()
    return TokenTable([bytes(fld.parts[i]) for i in fld.data])


def _quantization_name(file_type: int | None, reader: GGUFReader) -> str:
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
    for tensor in reader.tensors:
        if len(tensor.shape) < 2:
            continue
        type_name = GGMLQuantizationType(tensor.tensor_type).name
        totals[type_name] = totals.get(type_name, 0) + int(tensor.n_bytes)
    if not totals:
        return "unknown"
    return max(totals.items(), key=lambda item: item[1])[0]


def tokenizer_fingerprint(
    vocab_type: str | None,
    tokens: TokenTable,
    *,
    bos: int | None,
    eos: int | None,
    add_bos: bool,
    add_eos: bool,
) -> str:
    """sha256 over everything llama.cpp's compatibility check compares: equal means compatible."""
    hasher = hashlib.sha256()
    hasher.update(f"{vocab_type}|{bos}|{eos}|{int(add_bos)}|{int(add_eos)}|".encode())
    tokens.digest_into(hasher)
    return hasher.hexdigest()


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


_TensorRow = tuple[str, int, int]  # name, elements, bytes


def _tensor_rows(reader: GGUFReader) -> list[_TensorRow]:
    return [(str(t.name), int(t.n_elements), int(t.n_bytes)) for t in reader.tensors]


def _other_parts(first: Path, count: int) -> tuple[list[_TensorRow], int]:
    """Tensors and bytes on disk of parts 2..count of a split model; a missing part raises."""
    parts = shard_info(first)
    if parts is None or parts[0] != 1 or parts[1] != count:
        raise ModelLoadError(
            str(first), f"split model of {count} parts, but the file is not named as part 1"
        )
    stem = first.name[:-_SHARD_SUFFIX_LEN]
    rows: list[_TensorRow] = []
    size = 0
    for k in range(2, count + 1):
        sibling = first.with_name(f"{stem}-{k:05d}-of-{count:05d}.gguf")
        try:
            st = sibling.stat()
        except OSError:
            raise ModelLoadError(
                str(first), f"part {k} of {count} is missing ({sibling.name})"
            ) from None
        try:
            part_reader = _READER_CLASS(sibling, mode="r")
        except _TruncatedError:
            raise ModelLoadError(str(first), f"part {k} of {count} is truncated") from None
        except Exception as exc:  # a broken part makes the whole model unusable
            raise ModelLoadError(str(first), f"part {k} of {count} is unreadable ({exc})") from None
        rows.extend(_tensor_rows(part_reader))
        size += int(st.st_size)
        del part_reader
    return rows, size


@dataclass(frozen=True)
class _ByteSplit:
    layers: tuple[int, ...]
    embedding: int
    output: int
    other: int
    tied: bool


def _split_bytes(rows: list[_TensorRow], n_layers: int | None) -> _ByteSplit:
    """Tensor bytes per repeating layer ("blk.N."), token embeddings, output head, the rest."""
    layers = [0] * (n_layers or 0)
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
    return _ByteSplit(tuple(layers), embedding, output, other, not has_output_matrix)


def _build_info(path: Path, reader: GGUFReader, st: os.stat_result) -> GGUFInfo:
    version_value = _int(reader, "GGUF.version")
    arch = _str(reader, "general.architecture") or "unknown"
    kind = _str(reader, "general.type") or ("mmproj" if arch == "clip" else "model")

    def arch_int(suffix: str) -> int | None:
        return _int(reader, f"{arch}.{suffix}")

    n_embd = arch_int("embedding_length")
    n_head = arch_int("attention.head_count")
    n_head_kv = arch_int("attention.head_count_kv")
    if n_head_kv is None:
        n_head_kv = n_head
    default_head_dim = n_embd // n_head if n_embd and n_head else None
    head_dim_k = arch_int("attention.key_length") or default_head_dim
    head_dim_v = arch_int("attention.value_length") or head_dim_k

    tokens = _token_texts(reader)
    vocab_type = _str(reader, "tokenizer.ggml.model")
    pre = _str(reader, "tokenizer.ggml.pre")
    bos_default, eos_default, add_bos_default, add_eos_default = _VOCAB_DEFAULTS.get(
        vocab_type or "", (None, None, False, False)
    )
    if vocab_type == "gpt2" and pre in _BPE_PRE_ADD_BOS:
        add_bos_default = True
    if vocab_type == "gpt2" and pre in ("glm4", "chatglm-bpe"):
        bos_default = None
    bos = _int(reader, "tokenizer.ggml.bos_token_id")
    eos = _int(reader, "tokenizer.ggml.eos_token_id")
    bos = bos_default if bos is None else bos
    eos = eos_default if eos is None else eos
    add_bos = _bool(reader, "tokenizer.ggml.add_bos_token")
    add_eos = _bool(reader, "tokenizer.ggml.add_eos_token")
    add_bos = add_bos_default if add_bos is None else add_bos
    add_eos = add_eos_default if add_eos is None else add_eos

    file_type = _int(reader, "general.file_type")
    shard_count = _int(reader, "split.count") or 1
    template = _str(reader, "tokenizer.chat_template")
    name = _str(reader, "general.name") or path.stem

    rows = _tensor_rows(reader)
    total_size = int(st.st_size)
    if shard_count > 1:
        extra_rows, extra_size = _other_parts(path, shard_count)
        rows.extend(extra_rows)
        total_size += extra_size
    n_layers = arch_int("block_count")
    split = _split_bytes(rows, n_layers)

    return GGUFInfo(
        path=path,
        size_bytes=int(st.st_size),
        total_size_bytes=total_size,
        mtime=float(st.st_mtime),
        gguf_version=version_value or 0,
        architecture=arch,
        name=name,
        kind=kind,
        size_label=_str(reader, "general.size_label"),
        parameter_count=sum(elements for _name, elements, _bytes in rows),
        tensor_count=len(rows),
        quantization=_quantization_name(file_type, reader),
        file_type=file_type,
        context_length=arch_int("context_length"),
        n_layers=n_layers,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        vocab_type=vocab_type,
        tokenizer_pre=pre,
        vocab_size=len(tokens),
        bos_token_id=bos,
        eos_token_id=eos,
        add_bos=add_bos,
        add_eos=add_eos,
        tokenizer_fingerprint=tokenizer_fingerprint(
            vocab_type, tokens, bos=bos, eos=eos, add_bos=add_bos, add_eos=add_eos
        ),
        shard_count=shard_count,
        chat_template=template,
        layer_bytes=split.layers,
        embedding_bytes=split.embedding,
        output_bytes=split.output,
        other_tensor_bytes=split.other,
        tied_embeddings=split.tied,
        tokens=tokens,
    )


def _check_magic(path: Path, size: int) -> None:
    with path.open("rb") as handle:
        head = handle.read(8)
    if head[: len(GGUF_MAGIC)] != GGUF_MAGIC[: len(head)] or not head:
        raise ModelLoadError(str(path), "not a GGUF file (bad magic)")
    if len(head) < 8:
        raise ModelLoadError(str(path), f"file is truncated ({size} bytes, no complete header)")
    version = int.from_bytes(head[4:8], "little")
    swapped = int.from_bytes(head[4:8], "big")
    if version not in _SUPPORTED_VERSIONS and swapped not in _SUPPORTED_VERSIONS:
        raise ModelLoadError(str(path), f"unsupported GGUF version {version}")


def _read(path: Path, st: os.stat_result) -> GGUFInfo:
    size = int(st.st_size)
    if size == 0:
        raise ModelLoadError(str(path), "file is empty")
    _check_magic(path, size)
    try:
        reader = _READER_CLASS(path, mode="r")
    except _TruncatedError as exc:
        raise ModelLoadError(
            str(path), f"file is truncated (needs at least {exc.needed} bytes, has {size})"
        ) from None
    try:
        if _READER_CLASS is GGUFReader:  # stock reader: check the data section ourselves
            needed = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
            if needed > size:
                raise _TruncatedError(needed)
        return _build_info(path, reader, st)
    except _TruncatedError as exc:
        raise ModelLoadError(
            str(path), f"file is truncated (needs at least {exc.needed} bytes, has {size})"
        ) from None
    finally:
        del reader  # drop the memory map now, not at the next garbage collection


_cache: OrderedDict[tuple[str, int, int], GGUFInfo | str] = OrderedDict()
_cache_lock = threading.Lock()


def clear_inspect_cache() -> None:
    with _cache_lock:
        _cache.clear()


def inspect_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF header. Raises ModelLoadError (and nothing else) for any unusable path."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelLoadError(str(p), "file not found") from None
    except PermissionError:
        raise ModelLoadError(str(p), "permission denied") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(str(p), _os_reason(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelLoadError(str(p), "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(str(p), "not a regular file")

    try:
        key = (str(p.resolve()), int(st.st_size), int(st.st_mtime_ns))
    except (OSError, RuntimeError):
        key = (str(p.absolute()), int(st.st_size), int(st.st_mtime_ns))
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if isinstance(cached, GGUFInfo):
        return cached if cached.path == p else dataclasses.replace(cached, path=p)
    if isinstance(cached, str):
        raise ModelLoadError(str(p), cached)

    try:
        result: GGUFInfo | str = _read(p, st)
    except ModelLoadError as exc:
        result = exc.reason
    except PermissionError:
        result = "permission denied"
    except OSError as exc:
        result = _os_reason(exc)
    except MemoryError:
        result = "corrupt GGUF header (implausible sizes)"
    except Exception as exc:  # any parser failure on bad bytes is a corrupt file
        detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        result = f"corrupt GGUF header ({detail})"

    with _cache_lock:
        _cache[key] = result
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_LIMIT:
            _cache.popitem(last=False)
    if isinstance(result, str):
        raise ModelLoadError(str(p), result)
    return result


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__
