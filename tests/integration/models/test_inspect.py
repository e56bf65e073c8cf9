"""Reading GGUF headers: real models, synthetic files, and every kind of broken file."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from app.errors import A_FOLDER, NO_SUCH_FILE, ModelLoadError
from models.gguf import GGUFInfo, TokenTable, clear_inspect_cache, inspect_gguf, shard_info
from tests.helpers.model_files import bundled_q4_1, write_broken_files, write_tiny_gguf

SMOLLM_VOCAB = 49152


@pytest.mark.model
def test_bundled_smollm2_header_is_read_correctly() -> None:
    info = inspect_gguf(bundled_q4_1())
    assert info.architecture == "llama"
    assert info.quantization == "Q4_1"
    assert info.vocab_size == SMOLLM_VOCAB
    assert info.vocab_type == "gpt2"
    assert (info.n_layers, info.n_embd, info.n_head, info.n_head_kv) == (30, 576, 9, 3)
    assert info.head_dim_k == info.head_dim_v == 64
    assert info.context_length == 8192
    assert (info.bos_token_id, info.eos_token_id, info.add_bos, info.add_eos) == (
        1,
        2,
        False,
        False,
    )
    assert 134_000_000 < info.parameter_count < 135_000_000
    assert info.size_bytes == bundled_q4_1().stat().st_size
    assert info.is_model and info.kind == "model"
    assert info.tokens[0] == "<|endoftext|>" and info.tokens[1] == "<|im_start|>"
    assert info.has_chat_template and "<|im_start|>" in (info.chat_template or "")
    # Tokens and the template stay out of repr (a 49k-token repr would swamp any log).
    assert "im_start" not in repr(info) and len(repr(info)) < 1500
    assert len(info.tokenizer_fingerprint) == 64


@pytest.mark.model
def test_demo_family_quantizations_and_shared_tokenizer(demo_models: object) -> None:
    expected = {"f32": "F32", "q8_0": "Q8_0", "q4_1": "Q4_1", "q4_0": "Q4_0", "q2_k": "Q2_K"}
    infos = {attr: inspect_gguf(getattr(demo_models, attr)) for attr in expected}
    for attr, quant in expected.items():
        assert infos[attr].quantization == quant, attr
        assert infos[attr].architecture == "llama"
        assert infos[attr].vocab_size == SMOLLM_VOCAB
    assert len({i.tokenizer_fingerprint for i in infos.values()}) == 1
    assert len({i.parameter_count for i in infos.values()}) == 1
    sizes = [infos[a].size_bytes for a in ("f32", "q8_0", "q4_1", "q4_0", "q2_k")]
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.model
def test_gemma_header(gemma_model: Path) -> None:
    info = inspect_gguf(gemma_model)
    assert info.architecture == "gemma3"
    assert info.quantization == "Q4_K_M"
    assert info.vocab_type == "llama"
    assert info.vocab_size == 262144
    assert (info.bos_token_id, info.eos_token_id, info.add_bos) == (2, 1, True)
    assert info.tied_embeddings  # no output.weight: the output head reuses token_embd


@pytest.mark.model
def test_header_agrees_with_llama_cpp(gemma_model: Path) -> None:
    """The header-only reading matches what llama.cpp itself loads (vocab_only is fast)."""
    import llama_cpp

    spm_or_bpe = {"llama": llama_cpp.LLAMA_VOCAB_TYPE_SPM, "gpt2": llama_cpp.LLAMA_VOCAB_TYPE_BPE}
    for path in (bundled_q4_1(), gemma_model):
        info = inspect_gguf(path)
        model = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        try:
            vocab = llama_cpp.llama_model_get_vocab(model.model)
            assert model.n_vocab() == info.vocab_size
            assert llama_cpp.llama_vocab_type(vocab) == spm_or_bpe[info.vocab_type or ""]
            assert model.token_bos() == info.bos_token_id
            assert model.token_eos() == info.eos_token_id
            assert llama_cpp.llama_vocab_get_add_bos(vocab) == info.add_bos
            assert llama_cpp.llama_vocab_get_add_eos(vocab) == info.add_eos
            for token_id in random.Random(0).sample(range(info.vocab_size), 200):
                text = llama_cpp.llama_vocab_get_text(vocab, token_id)
                assert text == info.tokens.raw(token_id), token_id
        finally:
            model.close()


def test_synthetic_file_fields(tmp_path: Path) -> None:
    path = write_tiny_gguf(
        tmp_path / "tiny.gguf", vocab_model="llama", add_bos=True, chat_template="{{ messages }}"
    )
    info = inspect_gguf(path)
    assert info.quantization == "F32" and info.file_type == 0
    assert info.vocab_type == "llama" and info.vocab_size == 64 and info.add_bos
    assert info.chat_template == "{{ messages }}"
    assert info.n_layers == 2 and len(info.layer_bytes) == 2
    assert info.tensor_bytes == sum(info.layer_bytes) + info.embedding_bytes + info.output_bytes
    assert info.parameter_count == 4 * 8 + 2 * 64 + 8
    assert info.to_dict()["vocab_size"] == 64 and "tokens" not in info.to_dict()


def test_quantization_falls_back_to_dominant_tensor_type(tmp_path: Path) -> None:
    info = inspect_gguf(write_tiny_gguf(tmp_path / "nofiletype.gguf", file_type=None))
    assert info.file_type is None
    assert info.quantization == "F32"


def test_missing_special_keys_use_llama_cpp_defaults(tmp_path: Path) -> None:
    spm = inspect_gguf(
        write_tiny_gguf(
            tmp_path / "spm.gguf", vocab_model="llama", bos=None, eos=None, add_bos=None
        )
    )
    assert (spm.bos_token_id, spm.eos_token_id, spm.add_bos, spm.add_eos) == (1, 2, True, False)
    bpe = inspect_gguf(
        write_tiny_gguf(tmp_path / "bpe.gguf", vocab_model="gpt2", bos=None, eos=None, add_bos=None)
    )
    assert (bpe.bos_token_id, bpe.eos_token_id, bpe.add_bos) == (11, 11, False)


def test_adapter_and_vocabless_files_are_not_models(tmp_path: Path) -> None:
    adapter = inspect_gguf(write_tiny_gguf(tmp_path / "lora.gguf", general_type="adapter"))
    assert adapter.kind == "adapter" and not adapter.is_model
    bare = inspect_gguf(write_tiny_gguf(tmp_path / "bare.gguf", vocab_model=None))
    assert not bare.has_vocab and not bare.is_model and bare.vocab_size == 0
    vocab_only = inspect_gguf(write_tiny_gguf(tmp_path / "ggml-vocab.gguf", weights=False))
    assert vocab_only.has_vocab and vocab_only.tensor_count == 0
    assert vocab_only.problem == "no weights (a vocabulary-only file)"


@pytest.mark.parametrize(
    "name",
    ["empty.gguf", "random.gguf", "notes.gguf", "cut-header.gguf", "cut-data.gguf", "future.gguf"],
)
def test_broken_files_raise_model_load_error_with_reason(tmp_path: Path, name: str) -> None:
    path, word = write_broken_files(tmp_path)[name]
    with pytest.raises(ModelLoadError) as caught:
        inspect_gguf(path)
    assert word in caught.value.reason
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.model
def test_real_model_cut_short_is_truncated(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with bundled_q4_1().open("rb") as src:
        cut.write_bytes(src.read(5_000_000))
    with pytest.raises(ModelLoadError, match="file is truncated"):
        inspect_gguf(cut)


def test_missing_path_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=NO_SUCH_FILE):
        inspect_gguf(tmp_path / "nope.gguf")
    with pytest.raises(ModelLoadError, match=A_FOLDER):
        inspect_gguf(tmp_path)


def test_random_corruption_only_ever_raises_model_load_error(tmp_path: Path) -> None:
    """Flip bytes and cut the file at random places: a reason, never a crash or a hang."""
    good = write_tiny_gguf(tmp_path / "good.gguf").read_bytes()
    rng = random.Random(1234)
    raised = 0
    for trial in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(8, len(data))] = rng.randrange(256)
        if rng.random() < 0.5:
            del data[rng.randrange(8, len(data)) :]
        path = tmp_path / f"fuzz{trial}.gguf"
        path.write_bytes(bytes(data))
        try:
            info = inspect_gguf(path)
        except ModelLoadError as exc:
            raised += 1
            assert exc.reason and "\n" not in exc.reason
        else:
            assert isinstance(info, GGUFInfo)
        path.unlink()
    assert raised > 50  # most corruptions are detected, the rest still parse to a GGUFInfo


def test_results_are_cached_by_path_size_and_mtime(tmp_path: Path) -> None:
    clear_inspect_cache()
    path = write_tiny_gguf(tmp_path / "m.gguf")
    first = inspect_gguf(path)
    assert inspect_gguf(path) is first
    # A rewrite with a different vocabulary is seen (size and mtime change).
    write_tiny_gguf(path, tokens=[f"t{i}" for i in range(80)])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = inspect_gguf(path)
    assert second.vocab_size == 80 and second is not first
    # Failures are cached too, and forgotten when the file changes.
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelLoadError):
        inspect_gguf(bad)
    write_tiny_gguf(bad)
    assert inspect_gguf(bad).vocab_size == 64


def test_split_model_totals_and_missing_part(tmp_path: Path) -> None:
    first = write_tiny_gguf(tmp_path / "split.gguf", split_max_tensors=2, n_layers=2)
    assert first.name == "split-00001-of-00002.gguf"
    assert shard_info(first) == (1, 2) and shard_info(tmp_path / "plain.gguf") is None
    info = inspect_gguf(first)
    second = tmp_path / "split-00002-of-00002.gguf"
    assert info.shard_count == 2
    assert info.total_size_bytes == first.stat().st_size + second.stat().st_size
    assert info.tensor_count == 4 and info.is_model
    second.unlink()
    clear_inspect_cache()
    with pytest.raises(ModelLoadError, match="part 2 of 2 is missing"):
        inspect_gguf(first)


def test_token_table_compares_like_strcmp() -> None:
    a = TokenTable([b"a", b"bc", b"\xff", b"d"])
    b = TokenTable([b"a", b"bc", b"\xff", b"e"])
    assert a[2] == "\udcff" and a.raw(2) == b"\xff" and len(a) == 4
    assert a.first_difference(b, 0, 4) == 3
    assert a.first_difference(b, 0, 3) is None
    # Same bytes, different token boundaries.
    assert TokenTable([b"ab", b"c"]).first_difference(TokenTable([b"a", b"bc"]), 0, 2) == 0
