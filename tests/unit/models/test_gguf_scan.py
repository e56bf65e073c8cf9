"""The header scan is the one GGUF header reader: it reads what the `gguf` package's own public
reader reads from the same file, in either byte order, and the description is built from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter

from models.gguf import inspect_gguf
from models.gguf.scan import scan_header

TOKENS = ["<unk>", "<s>", "</s>", "héllo", " wörld", *[f"t{i}" for i in range(59)]]


def _write(path: Path, endian: GGUFEndian) -> Path:
    writer = GGUFWriter(path, "llama", endianess=endian)
    writer.add_name("scan test")
    writer.add_block_count(2)
    writer.add_context_length(512)
    writer.add_embedding_length(8)
    writer.add_head_count([2, 2])  # per layer, as some architectures store it
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_bool("llama.use_parallel_residual", True)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(TOKENS)
    writer.add_token_scores([float(-i) for i in range(len(TOKENS))])
    writer.add_token_types([1] * len(TOKENS))
    writer.add_token_merges(["h é", "w ö"])
    writer.add_add_bos_token(True)
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    rng = np.random.default_rng(0)
    writer.add_tensor("token_embd.weight", rng.standard_normal((4, 8), dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", rng.standard_normal((8, 8)).astype(np.float16))
    writer.add_tensor("blk.1.attn_q.weight", rng.standard_normal((8, 8), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _expected(reader: GGUFReader) -> tuple[dict[str, Any], dict[str, list[Any]], list[str]]:
    scalars: dict[str, Any] = {}
    arrays: dict[str, list[Any]] = {}
    tokens: list[str] = []
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if fld.types[0] != GGUFValueType.ARRAY:
            scalars[key] = fld.contents()
        elif key == "tokenizer.ggml.tokens":
            tokens = fld.contents()
        elif fld.types[-1] != GGUFValueType.STRING:
            arrays[key] = fld.contents()
    return scalars, arrays, tokens


@pytest.mark.parametrize("endian", [GGUFEndian.LITTLE, GGUFEndian.BIG], ids=["little", "big"])
def test_the_scan_reads_what_the_gguf_packages_reader_reads(
    tmp_path: Path, endian: GGUFEndian
) -> None:
    path = _write(tmp_path / "model.gguf", endian)
    scan = scan_header(path, path.stat().st_size)
    reader = GGUFReader(path)
    scalars, arrays, tokens = _expected(reader)

    assert scan.version == int(reader.fields["GGUF.version"].contents())
    assert scan.scalars == scalars
    assert {key: values.tolist() for key, values in scan.arrays.items()} == arrays
    assert list(scan.tokens) == tokens == TOKENS
    assert scan.array_lengths["tokenizer.ggml.merges"] == 2  # walked, not kept
    assert [(t.name, t.n_dims, t.type_id, t.n_elements, t.n_bytes) for t in scan.tensors] == [
        (t.name, len(t.shape), int(t.tensor_type), int(t.n_elements), int(t.n_bytes))
        for t in reader.tensors
    ]
    assert scan.data_offset == reader.data_offset


def test_the_description_comes_from_the_one_scan(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf", GGUFEndian.LITTLE)
    info = inspect_gguf(path)
    assert (info.architecture, info.name, info.n_layers, info.context_length) == (
        "llama",
        "scan test",
        2,
        512,
    )
    assert (info.n_head, info.n_head_kv, info.head_dim_k) == (2, 1, 4)  # per-layer: the largest
    assert list(info.tokens) == TOKENS and info.vocab_size == len(TOKENS)
    assert info.add_bos is True and info.chat_template is not None
    assert info.tensor_count == 4 and info.parameter_count == 4 * 8 + 8 * 8 + 8 * 8 + 8
    assert info.quantization == "F32"  # no file type: the type holding the most matrix bytes
