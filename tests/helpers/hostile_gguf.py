"""A corpus of malformed and malicious GGUF files, built from a real model's header.

`build_corpus(source, folder)` copies the metadata of `source` (a real SmolLM2 GGUF: its
hyperparameters, 49k tokens and merges) and writes one small file per case, each with one thing
wrong: counts that claim millions of keys, tensors or array items, nested arrays, absurd layer and
head counts, a tokenizer llama.cpp cannot use, tensor tables that contradict the file, truncations,
escape codes in names, plus non-files (a FIFO, a directory). Sizes sit in the header, never on
disk: every file is a few MB at most. The bytes are written here by hand, independently of the
parser under test, so the corpus cannot share its bugs.

Each `Case` says what a vetted reader must answer: `refuse` (a word its reason contains) for files
that must never reach llama.cpp, or None for files the header check may pass (llama.cpp then
refuses or loads them; the crash-proof probe covers the rest).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Case", "build_corpus", "read_metadata"]

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_ALIGN = 32


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    refuse: str | None  # a word the refusal must contain; None: the header may pass


def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", vtype) + payload


def u32(key: str, value: int) -> bytes:
    return _kv(key, U32, struct.pack("<I", value))


def string(key: str, value: str | bytes) -> bytes:
    return _kv(key, STRING, _s(value))


def _skip_value(data: bytes, pos: int, vtype: int) -> int:
    fixed = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}
    if vtype in fixed:
        return pos + fixed[vtype]
    if vtype == STRING:
        (n,) = struct.unpack_from("<Q", data, pos)
        return pos + 8 + n
    item, count = struct.unpack_from("<IQ", data, pos)
    pos += 12
    for _ in range(count):
        pos = _skip_value(data, pos, item)
    return pos


def read_metadata(source: Path) -> dict[str, bytes]:
    """The source file's metadata: key -> its raw encoding (key, type and value), in order."""
    data = source.read_bytes()[: 64 * 1024 * 1024]
    _magic, _version, _n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    pos = 24
    out: dict[str, bytes] = {}
    for _ in range(n_kv):
        start = pos
        (klen,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8 : pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos = _skip_value(data, pos + 4, vtype)
        out[key] = data[start:pos]
    return out


@dataclass
class _Tensor:
    name: bytes
    dims: tuple[int, ...]
    type_id: int = 0  # F32
    offset: int | None = None  # None: the next aligned offset
    data_bytes: int | None = None  # bytes actually written; None: what the shape needs


def _tensor_info(t: _Tensor, offset: int) -> bytes:
    head = _s(t.name) + struct.pack("<I", len(t.dims))
    dims = b"".join(struct.pack("<Q", d) for d in t.dims)
    return head + dims + struct.pack("<IQ", t.type_id, offset)


def _write(
    path: Path,
    kvs: list[bytes],
    tensors: Sequence[_Tensor] = (),
    *,
    n_kv: int | None = None,
    n_tensors: int | None = None,
    version: int = 3,
    cut: int | None = None,
) -> Path:
    infos: list[bytes] = []
    data_size = 0
    for t in tensors:
        need = 4
        for d in t.dims:
            need *= d
        size = t.data_bytes if t.data_bytes is not None else need
        infos.append(_tensor_info(t, t.offset if t.offset is not None else data_size))
        data_size += size + (-size % _ALIGN)
    header = struct.pack(
        "<4sIQQ",
        b"GGUF",
        version,
        len(tensors) if n_tensors is None else n_tensors,
        len(kvs) if n_kv is None else n_kv,
    )
    body = header + b"".join(kvs) + b"".join(infos)
    body += b"\0" * (-len(body) % _ALIGN + data_size)
    path.write_bytes(body[:cut] if cut is not None else body)
    return path


def _small_tensors() -> list[_Tensor]:
    return [_Tensor(b"token_embd.weight", (8, 4)), _Tensor(b"output_norm.weight", (8,))]


def build_corpus(source: Path, folder: Path) -> list[Case]:
    """Write every hostile case into `folder` (created) and return them."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = read_metadata(source)
    cases: list[Case] = []

    def with_meta(**changes: bytes | None) -> list[bytes]:
        kvs = dict(meta)
        for key, raw in changes.items():
            real = key.replace("__", ".")
            if raw is None:
                kvs.pop(real, None)
            else:
                kvs[real] = raw
        return list(kvs.values())

    def add(name: str, refuse: str | None, make: Callable[[Path], object]) -> None:
        path = folder / f"{name}.gguf"
        make(path)
        cases.append(Case(name, path, refuse))

    def meta_case(name: str, refuse: str | None, **changes: bytes | None) -> None:
        add(name, refuse, lambda p: _write(p, with_meta(**changes), _small_tensors()))

    # Shape numbers llama.cpp aborts on.
    meta_case("block-count-0", "block_count", llama__block_count=u32("llama.block_count", 0))
    meta_case(
        "block-count-2-28", "block_count", llama__block_count=u32("llama.block_count", 1 << 28)
    )
    meta_case("block-count-513", "block_count", llama__block_count=u32("llama.block_count", 513))
    meta_case(
        "block-count-array",
        "block_count",
        llama__block_count=_kv("llama.block_count", ARRAY, struct.pack("<IQ", U32, 0)),
    )
    meta_case("embedding-0", "embedding", llama__embedding_length=u32("llama.embedding_length", 0))
    meta_case(
        "heads-2-31",
        "head count",
        llama__attention__head_count=u32("llama.attention.head_count", 1 << 31),
    )
    meta_case(
        "kv-heads-over-heads",
        "head count",
        llama__attention__head_count_kv=u32("llama.attention.head_count_kv", 10),
    )
    meta_case(
        "heads-not-multiple",
        "multiple",
        llama__attention__head_count_kv=u32("llama.attention.head_count_kv", 4),
    )
    meta_case(
        "heads-array-wrong-length",
        "layers",
        llama__attention__head_count=_kv(
            "llama.attention.head_count", ARRAY, struct.pack("<IQ", U32, 3) + b"\x09\0\0\0" * 3
        ),
    )
    # Tokenizers llama.cpp cannot use: refused at load, not by the header reader.
    meta_case("tokenizer-none", None, tokenizer__ggml__model=string("tokenizer.ggml.model", "none"))
    meta_case(
        "tokenizer-bogus", None, tokenizer__ggml__model=string("tokenizer.ggml.model", "bogus")
    )
    meta_case("tokenizer-missing", None, tokenizer__ggml__model=None)
    meta_case(
        "tokens-empty",
        None,
        tokenizer__ggml__tokens=_kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 0)),
    )
    meta_case("architecture-missing", None, general__architecture=None)
    meta_case(
        "architecture-unknown",
        None,
        general__architecture=string("general.architecture", "no-such-arch"),
    )
    meta_case(
        "bos-out-of-range",
        None,
        tokenizer__ggml__bos_token_id=u32("tokenizer.ggml.bos_token_id", 4_000_000_000),
    )
    meta_case(
        "escape-codes-in-name",
        None,
        general__name=string("general.name", "\x1b]0;pwned\x07\x1b[2J\rfake line\nsecond"),
    )
    meta_case("no-tensors-real-header", None)
    # Passes every header rule, yet llama.cpp aborts while building its token map: the case the
    # child-process load check exists for.
    texts = [f"t{i}".encode() for i in range(49152)]
    texts[101] = texts[100]
    listing = struct.pack("<IQ", STRING, len(texts)) + b"".join(_s(t) for t in texts)
    meta_case(
        "duplicate-token-crashes-llama",
        None,
        tokenizer__ggml__tokens=_kv("tokenizer.ggml.tokens", ARRAY, listing),
    )

    # Counts from the header that claim millions of things.
    kvs = with_meta()
    add("claims-2m-keys", "metadata keys", lambda p: _write(p, kvs, n_kv=2_000_000))
    add(
        "real-20k-keys",
        "metadata keys",
        lambda p: _write(p, kvs + [u32(f"junk.{i}", i) for i in range(20_000)]),
    )
    add("claims-1m-tensors", "tensors", lambda p: _write(p, kvs, _small_tensors(), n_tensors=10**6))
    add(
        "real-70k-tensors",
        "tensors",
        lambda p: _write(p, kvs, [_Tensor(f"t{i}".encode(), (1,)) for i in range(70_000)]),
    )
    nested = _kv("junk.nested", ARRAY, struct.pack("<IQ", ARRAY, 4_000_000))
    nested += struct.pack("<IQ", U8, 0) * 1000  # the first few of the claimed empty arrays
    add("nested-empty-arrays", "nested", lambda p: _write(p, [*kvs, nested]))
    add(
        "array-claims-2-40-items",
        "items",
        lambda p: _write(p, [*kvs, _kv("junk.arr", ARRAY, struct.pack("<IQ", U32, 1 << 40))]),
    )
    many = 2_000_001  # one more string than the reader walks; only the count is written
    add(
        "string-array-over-cap",
        "items",
        lambda p: _write(p, [*kvs, _kv("junk.s", ARRAY, struct.pack("<IQ", STRING, many))]),
    )
    empty_strings = struct.pack("<IQ", STRING, 1_200_000) + b"\0" * 8 * 1_200_000  # 9.6 MB
    add(
        "1-2m-empty-strings", None, lambda p: _write(p, [*kvs, _kv("junk.e", ARRAY, empty_strings)])
    )
    add(
        "string-claims-2-40-bytes",
        "bytes",
        lambda p: _write(p, [*kvs, _kv("junk.str", STRING, struct.pack("<Q", 1 << 40))]),
    )
    add(
        "key-claims-2-62-bytes",
        "bytes",
        lambda p: _write(p, [*kvs, struct.pack("<Q", 1 << 62) + b"k"]),
    )
    add(
        "unknown-value-type",
        "type",
        lambda p: _write(p, [*kvs, _kv("junk.t", 99, b"\0" * 8)]),
    )
    add("duplicate-key", "twice", lambda p: _write(p, [*kvs, kvs[0]]))
    add("bad-alignment", "alignment", lambda p: _write(p, [*kvs, u32("general.alignment", 3)]))
    # llama.cpp reads the alignment as a u32 and aborts on any other type.
    alignment_u64 = _kv("general.alignment", U64, struct.pack("<Q", 32))
    add("alignment-not-u32", "alignment", lambda p: _write(p, [*kvs, alignment_u64]))
    not_utf8 = _kv(b"junk.\xff", U32, struct.pack("<I", 1))
    add("key-not-utf8", "utf-8", lambda p: _write(p, [*kvs, not_utf8]))

    # Tensor tables that contradict the file.
    def tensor_case(name: str, refuse: str, tensors: list[_Tensor]) -> None:
        add(name, refuse, lambda p: _write(p, kvs, tensors))

    tensor_case("tensor-offset-past-end", "offset", [_Tensor(b"a", (8,), offset=1 << 40)])
    misaligned = [_Tensor(b"a", (8,)), _Tensor(b"b", (8,), offset=33)]
    tensor_case("tensor-misaligned", "offset", misaligned)
    tensor_case("tensor-unknown-type", "type", [_Tensor(b"a", (8,), type_id=99)])
    tensor_case("tensor-0-dims", "dimensions", [_Tensor(b"a", ())])
    tensor_case("tensor-5-dims", "dimensions", [_Tensor(b"a", (1, 1, 1, 1, 1))])
    tensor_case("tensor-huge-dims", "large", [_Tensor(b"a", (1 << 40, 1 << 40), data_bytes=0)])
    tensor_case("tensor-negative-dim", "negative", [_Tensor(b"a", (2**64 - 1,), data_bytes=0)])
    tensor_case("tensor-duplicate-name", "twice", [_Tensor(b"a", (8,)), _Tensor(b"a", (8,))])
    tensor_case("tensor-long-name", "longer", [_Tensor(b"x" * 200, (8,))])
    tensor_case("tensor-name-not-utf8", "utf-8", [_Tensor(b"a\xff", (8,))])
    tensor_case("tensor-row-not-block", "block", [_Tensor(b"a", (5,), type_id=2, data_bytes=32)])
    tensor_case("tensor-data-missing", "truncated", [_Tensor(b"a", (1 << 20,), data_bytes=64)])

    # Truncations and plain garbage.
    full = _write(folder / "_full.tmp", kvs, _small_tensors()).read_bytes()
    (folder / "_full.tmp").unlink()
    for label, cut in (("magic", 3), ("counts", 20), ("keys", len(full) // 3), ("data", -8)):
        add(f"cut-{label}", "truncated", lambda p, c=cut: p.write_bytes(full[:c]))
    add("empty", "empty", lambda p: p.write_bytes(b""))
    add("version-1", "version", lambda p: p.write_bytes(b"GGUF" + struct.pack("<I", 1) + full[8:]))
    add("not-gguf", "not a GGUF file", lambda p: p.write_bytes(b"<html>404</html>\n" * 4))

    # Things that are not regular files.
    add("fifo", "regular file", os.mkfifo)
    add("directory", "a folder", lambda p: p.mkdir())
    add("symlink-loop", "symbolic links", lambda p: os.symlink(p.name, p))
    return cases
