"""Layer removal with the gguf writer: a tiny synthetic file for the bookkeeping, the real demo
model for "llama.cpp loads it and accepts it as a draft"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from app.errors import InvalidSettingError, ModelLoadError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from models.compat import check_draft_file
from models.prune import USELESS_DRAFT_DROP, prune_layers, useless_draft
from tests.helpers.partials import stale_partial


def _tiny_model(path: Path, blocks: int = 4) -> Path:
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(blocks)
    writer.add_key_value("llama.attention.head_count_kv", [1, 2, 3, 4], gguf.GGUFValueType.ARRAY)
    writer.add_key_value(
        "tokenizer.ggml.tokens", [b"a", b"\xff", b"c"], gguf.GGUFValueType.ARRAY
    )  # a token that is not UTF-8 must survive the copy byte for byte
    writer.add_string("general.name", "tiny")
    writer.add_tensor("token_embd.weight", np.arange(6, dtype=np.float32).reshape(2, 3))
    for i in range(blocks):
        writer.add_tensor(f"blk.{i}.attn_q.weight", np.full((2, 2), i, dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(3, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensors(path: Path) -> dict[str, Any]:
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(path).tensors}


def test_removed_blocks_vanish_and_the_rest_are_renumbered(tmp_path: Path) -> None:
    src = _tiny_model(tmp_path / "tiny.gguf")
    dst = prune_layers(src, tmp_path / "out" / "pruned.gguf", [1, 2])
    reader = gguf.GGUFReader(dst)
    assert int(reader.fields["llama.block_count"].contents()) == 2
    # The per-layer array follows its layers: 0 and 3 survive.
    assert list(reader.fields["llama.attention.head_count_kv"].contents()) == [1, 4]
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert [bytes(tokens.parts[i]) for i in tokens.data] == [b"a", b"\xff", b"c"]
    assert reader.fields["general.name"].contents() == "tiny"
    tensors = _tensors(dst)
    assert sorted(tensors) == [
        "blk.0.attn_q.weight",
        "blk.1.attn_q.weight",
        "output_norm.weight",
        "token_embd.weight",
    ]
    assert (tensors["blk.1.attn_q.weight"] == 3).all()  # old block 3 is the new block 1
    assert (tensors["token_embd.weight"] == np.arange(6).reshape(2, 3)).all()
    assert not list((tmp_path / "out").glob("*.partial"))


def test_a_killed_runs_partial_file_is_removed_by_the_next_run(tmp_path: Path) -> None:
    """A prune killed mid-write leaves a copy up to the model's size, under a name no later
    run writes to: the next run removes it, and leaves a live writer's alone."""
    src = _tiny_model(tmp_path / "tiny.gguf")
    dst = tmp_path / "out" / "pruned.gguf"
    left = stale_partial(dst)
    live = dst.with_name(f"{dst.name}.{os.getpid()}-1.partial")  # another thread's, writing
    live.write_bytes(b"half")
    prune_layers(src, dst, [1])
    assert not left.exists() and live.exists()
    assert dst.is_file()


@pytest.mark.parametrize(
    ("drop", "message"),
    [([4], r"layers \[4\]"), ([-1], r"layers \[-1\]"), ([0, 1, 2, 3], "no model")],
)
def test_impossible_layer_lists_are_refused(tmp_path: Path, drop: list[int], message: str) -> None:
    src = _tiny_model(tmp_path / "tiny.gguf")
    with pytest.raises(InvalidSettingError, match=message):
        prune_layers(src, tmp_path / "pruned.gguf", drop)
    assert not (tmp_path / "pruned.gguf").exists()


def test_bad_sources_are_model_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        prune_layers(tmp_path / "missing.gguf", tmp_path / "x.gguf", [0])
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(ModelLoadError, match="not a readable GGUF"):
        prune_layers(junk, tmp_path / "x.gguf", [0])


def test_useless_demo_draft_loads_and_passes_the_draft_checks(
    demo_models: Any, tmp_path: Path
) -> None:
    path = useless_draft(demo_models.q4_1, tmp_path)
    assert path.parent == tmp_path
    source = gguf.GGUFReader(demo_models.q4_1)
    pruned = gguf.GGUFReader(path)
    n_source = int(source.fields["llama.block_count"].contents())
    kept = [i for i in range(n_source) if i not in USELESS_DRAFT_DROP]
    assert kept == [*range(9), 29]
    assert int(pruned.fields["llama.block_count"].contents()) == len(kept) == 10
    # Quantized tensors are copied byte for byte: the last source block is the new block 9.
    old = {t.name: t for t in source.tensors}
    new = {t.name: t for t in pruned.tensors}
    for suffix in ("attn_q.weight", "ffn_down.weight", "attn_norm.weight"):
        a, b = old[f"blk.29.{suffix}"], new[f"blk.9.{suffix}"]
        assert a.tensor_type == b.tensor_type
        assert np.array_equal(np.asarray(a.data), np.asarray(b.data))
    assert not any(name.startswith("blk.10.") for name in new)

    check_draft_file(path, Path(demo_models.f32))  # same vocabulary: accepted as a draft
    with LlamaModel(ModelConfig(str(path), n_ctx=64)) as model:
        facts = model.facts()
        assert facts.n_layer == 10
        assert facts.n_vocab == 49152
        assert model.feed(model.tokenize("Hello"), 1).shape == (1, 49152)
    # Built once: asking again reuses the file.
    mtime = path.stat().st_mtime_ns
    assert useless_draft(demo_models.q4_1, tmp_path) == path
    assert path.stat().st_mtime_ns == mtime
