"""The synthetic-model writer: real llama.cpp loads, tokenizes and runs what it writes, and a
random-weight target's quantized copy is a high-acceptance draft."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from app.engine.config import GenerationConfig
from app.engine.gamma import fixed
from app.llama.config import ModelConfig
from models.synthetic import SHAPES, LlamaShape, successor, vocabulary, write_model
from tests.helpers.engine import loaded_runtime, run_to_end
from tests.helpers.partials import stale_partial

pytestmark = pytest.mark.model

PROMPTS = ("Hello there, tell me a story about cats.", "def f(x): return x * 2", "The weather")


def test_real_shapes_have_their_models_parameter_counts() -> None:
    # Llama-3.1-8B has 8.03e9 parameters, Llama-3.2-1B 1.24e9 (untied output here: +0.26e9).
    assert SHAPES["8b"].n_params() == pytest.approx(8.03e9, rel=0.01)
    assert SHAPES["1b"].n_params() == pytest.approx(1.50e9, rel=0.01)


def test_vocabulary_is_unique_and_has_bytes_and_specials() -> None:
    tokens, scores, types = vocabulary(5000)
    assert len(tokens) == len(scores) == len(types) == 5000
    assert len(set(tokens)) == 5000
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert tokens[3] == "<0x00>" and tokens[258] == "<0xFF>"
    assert types.count(int(gguf.TokenType.BYTE)) == 256


def test_successor_is_a_permutation_that_never_predicts_specials_or_bytes() -> None:
    succ = successor(5000, language_seed=7)
    assert sorted(succ.tolist()) == list(range(5000))
    assert (succ[:259] == np.arange(259)).all()
    assert (succ[259:] >= 259).all()


def test_written_file_holds_the_shape_and_dtype(tmp_path: Path) -> None:
    shape = SHAPES["tiny"]
    path = write_model(tmp_path / "m.gguf", shape, dtype="F16")
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == len(list(shape.tensor_shapes()))
    assert tensors["blk.0.ffn_gate.weight"].tensor_type == gguf.GGMLQuantizationType.F16
    assert tensors["output_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert path.stat().st_size == pytest.approx(shape.file_bytes(2.0), rel=0.1)
    assert not list(path.parent.glob("*.partial"))


def test_a_killed_runs_partial_file_is_removed_by_the_next_run(tmp_path: Path) -> None:
    left = stale_partial(tmp_path / "m.gguf")
    write_model(tmp_path / "m.gguf", SHAPES["tiny"], dtype="F16")
    assert not left.exists()
    assert not list(tmp_path.glob("*.partial"))


def test_rows_larger_than_the_pool_are_written_whole(tmp_path: Path) -> None:
    # A vocabulary big enough that the embedding outgrows the random pool's largest layer
    # tensor exercises the shifted-window path; llama.cpp must still load every byte.
    shape = LlamaShape(20000, 64, 1, 4, 2, 128, n_ctx_train=512)
    path = write_model(tmp_path / "wide.gguf", shape, dtype="F16")
    with loaded_runtime(ModelConfig(str(path), n_ctx=256, n_threads=1)) as rt:
        result, _ = run_to_end(rt.engine, rt.text_prompt("abc"), GenerationConfig(max_tokens=8))
    assert result.stats.generated_tokens == 8


def test_llama_cpp_loads_tokenizes_and_generates(tiny_pair: tuple[Path, Path]) -> None:
    target, _ = tiny_pair
    with loaded_runtime(ModelConfig(str(target), n_ctx=512, n_threads=1)) as rt:
        text = "Hello world, xin chào!"
        ids = rt.text_prompt(text)
        assert ids[0] == rt.target.bos_id
        # SentencePiece starts the text with a word-start mark, which reads back as a space.
        assert rt.target.detokenize(ids[1:]) == " " + text
        # Letters merge into multi-letter pieces; "à" (outside the alphabet) falls back to bytes.
        assert len(ids) < len(text)
        byte_ids = [i for i in ids if 3 <= i < 3 + 256]
        assert len(byte_ids) == len("à".encode())
        result, _ = run_to_end(rt.engine, ids, GenerationConfig(max_tokens=24), speculative=False)
    assert result.stats.generated_tokens == 24
    assert result.finish_reason == "length"


def test_q8_0_copy_accepts_most_drafts_at_gamma_4(tiny_pair: tuple[Path, Path]) -> None:
    target, copy = tiny_pair
    cfg = {"n_ctx": 512, "n_threads": 1}
    with loaded_runtime(ModelConfig(str(target), **cfg), ModelConfig(str(copy), **cfg)) as rt:
        drafted = accepted = 0
        for prompt in PROMPTS:
            ids = rt.text_prompt(prompt)
            result, _ = run_to_end(rt.engine, ids, GenerationConfig(max_tokens=48, gamma=fixed(4)))
            drafted += result.stats.drafted
            accepted += result.stats.accepted
    assert drafted > 0
    assert accepted / drafted > 0.5
