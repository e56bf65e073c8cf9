"""Synthetic llama-architecture GGUF models: random weights, real shapes, a made-up vocabulary.

Speed and exactness do not need trained weights, and a model of any shape can be written in
seconds without a download, so the GPU check and tests use these to run real model sizes.

The models share a toy "language": every model written with the same `language_seed` maps each
token to the same successor (a fixed permutation of the vocabulary), through its own random
embedding and an output matrix that is that embedding, permuted. The transformer layers add
context-dependent random updates to the hidden state that can override the rule;
`language_strength` sets how often the rule wins, about equally at any shape. So two models of
different shapes agree on the next token often but not always, like a real draft and target,
and a quantized copy of a model agrees with it nearly always (docs/gpu-check.md has the
measured acceptance).

Random numbers come from one pool per scale, viewed at a different offset (and, for tensors
larger than the pool, as overlapping shifted rows) for every tensor: drawing 8 billion fresh
values would take minutes, and a model's speed does not depend on which random numbers it
holds.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.durable import replace_atomically
from models.partial import partial_path, remove_stale_partials

# The vocabulary's fixed head: SentencePiece's usual special ids, then the 256 byte tokens that
# let any text be encoded.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
_N_SPECIAL = 3
_N_BYTES = 256
_WORD_START = "\u2581"  # SentencePiece's word-start mark
_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# The vocabulary size language_strength was calibrated at (docs/gpu-check.md).
_CALIBRATION_VOCAB = 4096
_POOL_ELEMENTS = 1 << 26  # 64 Mi values per pool: larger than any one 8B-shaped layer tensor


@dataclass(frozen=True, slots=True)
class LlamaShape:
    """The hyperparameters that set a llama model's size and speed."""

    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx_train: int = 8192

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def tensor_shapes(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        """(GGUF tensor name, numpy shape) for every tensor, in file order."""
        kv = self.n_head_kv * self.head_dim
        yield "token_embd.weight", (self.n_vocab, self.n_embd)
        for i in range(self.n_layer):
            yield f"blk.{i}.attn_norm.weight", (self.n_embd,)
            yield f"blk.{i}.attn_q.weight", (self.n_embd, self.n_embd)
            yield f"blk.{i}.attn_k.weight", (kv, self.n_embd)
            yield f"blk.{i}.attn_v.weight", (kv, self.n_embd)
            yield f"blk.{i}.attn_output.weight", (self.n_embd, self.n_embd)
            yield f"blk.{i}.ffn_norm.weight", (self.n_embd,)
            yield f"blk.{i}.ffn_gate.weight", (self.n_ff, self.n_embd)
            yield f"blk.{i}.ffn_up.weight", (self.n_ff, self.n_embd)
            yield f"blk.{i}.ffn_down.weight", (self.n_embd, self.n_ff)
        yield "output_norm.weight", (self.n_embd,)
        yield "output.weight", (self.n_vocab, self.n_embd)

    def n_params(self) -> int:
        return sum(int(np.prod(shape)) for _, shape in self.tensor_shapes())

    def file_bytes(self, bytes_per_weight: float) -> int:
        """Approximate file size when matrices take `bytes_per_weight` (norms stay F32)."""
        return int(self.n_params() * bytes_per_weight)


LLAMA3_VOCAB = 128256
# Shapes of real models, so speed is measured where it matters: Llama-3.2-1B, Llama-3.1-8B, a
# ~0.2B draft with their vocabulary, and a tiny one for tests on a CPU.
SHAPES: dict[str, LlamaShape] = {
    "8b": LlamaShape(LLAMA3_VOCAB, 4096, 32, 32, 8, 14336),
    "1b": LlamaShape(LLAMA3_VOCAB, 2048, 16, 32, 8, 8192),
    "200m": LlamaShape(LLAMA3_VOCAB, 768, 4, 12, 4, 2048),
    "tiny": LlamaShape(4096, 64, 2, 4, 2, 128, n_ctx_train=2048),
}


def vocabulary(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style tokens, scores and types: specials, bytes, then letter strings.

    Pieces are every string of 1, 2, 3, ... characters from a small alphabet, with and without
    the word-start mark, in that order, so every piece's prefixes exist and llama.cpp's
    tokenizer can merge up to any of them; text outside the alphabet falls back to bytes.
    """
    from gguf import TokenType  # noqa: PLC0415 - the writer's enum, with gguf loaded anyway

    min_vocab = _N_SPECIAL + _N_BYTES + 2
    if n_vocab < min_vocab:
        raise ValueError(f"a vocabulary needs at least {min_vocab} tokens, got {n_vocab}")
    tokens = ["<unk>", "<s>", "</s>"]
    types = [int(TokenType.UNKNOWN), int(TokenType.CONTROL), int(TokenType.CONTROL)]
    tokens += [f"<0x{b:02X}>" for b in range(_N_BYTES)]
    types += [int(TokenType.BYTE)] * _N_BYTES
    alphabet = string.ascii_lowercase + string.ascii_uppercase + string.digits + ".,!?'-:;()"
    pieces: list[str] = [_WORD_START]
    for length in itertools.count(1):
        for combo in itertools.product(alphabet, repeat=length):
            word = "".join(combo)
            pieces += [word, _WORD_START + word]
        if len(pieces) >= n_vocab - len(tokens):
            break
    pieces = pieces[: n_vocab - len(tokens)]
    tokens += pieces
    types += [int(TokenType.NORMAL)] * len(pieces)
    # Longer pieces score higher so the tokenizer prefers them, as a trained vocabulary does.
    scores = [0.0] * (_N_SPECIAL + _N_BYTES) + [float(len(p)) for p in pieces]
    return tokens, scores, types


def successor(n_vocab: int, language_seed: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The language's next-token rule: a permutation of the ordinary tokens (no specials)."""
    first = _N_SPECIAL + _N_BYTES
    rng = np.random.default_rng(language_seed)
    perm = np.arange(n_vocab, dtype=np.int64)
    perm[first:] = first + rng.permutation(n_vocab - first)
    return perm


class _Pool:
    """Random values at one scale, handed out as views (no copy) of any shape.

    Uniform rather than normal values: drawing them is several times faster, and a uniform
    spread of the same variance serves as random weights just as well.
    """

    def __init__(
        self, base: np.ndarray[Any, Any], rng: np.random.Generator, scale: float, dtype: Any
    ) -> None:
        # base is uniform on [-1, 1): variance 1/3, hence the sqrt(3).
        self._data = (base * np.float32(scale * np.sqrt(3.0))).astype(dtype)
        self._rng = rng

    def view(self, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
        data = self._data
        n = int(np.prod(shape))
        if n <= data.size:
            start = int(self._rng.integers(0, data.size - n + 1))
            return data[start : start + n].reshape(shape)
        # Larger than the pool: rows are overlapping windows, each shifted by `step` values.
        rows, cols = shape
        step = max(1, (data.size - cols) // rows)
        start = int(self._rng.integers(0, data.size - cols - step * (rows - 1) + 1))
        return np.lib.stride_tricks.as_strided(
            data[start:], shape=shape, strides=(step * data.itemsize, data.itemsize)
        )

    def same_place(self, view: np.ndarray[Any, Any], other: _Pool) -> np.ndarray[Any, Any]:
        """The view of `other` at the offsets and strides of `view` (a view of this pool)."""
        start = (view.ctypes.data - self._data.ctypes.data) // self._data.itemsize
        return np.lib.stride_tricks.as_strided(
            other._data[start:], shape=view.shape, strides=view.strides
        )


class _Rows:
    """A matrix the gguf writer can write (shape, dtype, nbytes, tofile) without it existing
    whole in memory: rows are produced and written a block at a time. numpy's own tofile
    writes a strided view one value at a time, which is 50 times slower."""

    _BLOCK_BYTES = 64 << 20

    def __init__(
        self,
        shape: tuple[int, int],
        dtype: Any,
        rows: Any,  # rows(start, stop) -> ndarray
    ) -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.nbytes = shape[0] * shape[1] * self.dtype.itemsize
        self._rows = rows

    def tofile(self, fout: Any) -> None:
        step = max(1, self._BLOCK_BYTES // (self.shape[1] * self.dtype.itemsize))
        for start in range(0, self.shape[0], step):
            block = self._rows(start, min(start + step, self.shape[0]))
            np.ascontiguousarray(block, dtype=self.dtype).tofile(fout)


def write_model(
    path: Path,
    shape: LlamaShape,
    *,
    dtype: str = "F16",
    seed: int = 0,
    language_seed: int = 0,
    layer_gain: float = 1.0,
    language_strength: float = 4.5,
    name: str = "synthetic",
) -> Path:
    """Write a random-weight llama GGUF at `path` (F16 or F32 matrices) and return `path`."""
    import gguf  # noqa: PLC0415 - heavy import, only when writing

    np_dtype = {"F16": np.float16, "F32": np.float32}.get(dtype.upper())
    if np_dtype is None:
        raise ValueError(f"dtype must be F16 or F32, got {dtype!r}")
    if shape.n_embd % shape.n_head or shape.n_head % shape.n_head_kv:
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    rng = np.random.default_rng(seed)
    pool_size = min(_POOL_ELEMENTS, max(int(np.prod(s)) for _, s in shape.tensor_shapes()))
    # Each layer matrix keeps its input's scale times layer_gain, so the layers' updates to the
    # hidden state grow with the square root of depth alone. The embedding is small beside them:
    # the successor's logit margin is about language_strength times the typical largest of the
    # other logits, at any width, depth and vocabulary size (that largest grows as
    # sqrt(2 ln n_vocab)), so a model follows the rule often but not always.
    spread = float(np.sqrt(np.log(shape.n_vocab) / np.log(_CALIBRATION_VOCAB)))
    embed_std = language_strength * spread * float(np.sqrt(shape.n_layer / shape.n_embd))
    base = rng.random(pool_size, dtype=np.float32) * np.float32(2.0) - np.float32(1.0)
    embed = _Pool(base, rng, embed_std, np_dtype)
    in_embd = _Pool(base, rng, layer_gain / float(np.sqrt(shape.n_embd)), np_dtype)
    in_ff = _Pool(base, rng, layer_gain / float(np.sqrt(shape.n_ff)), np_dtype)
    # The output matrix holds embedding rows rescaled so the logits are about unit size.
    output_pool = _Pool(base, rng, 1.0 / float(np.sqrt(shape.n_embd)), np_dtype)
    del base
    norm = np.ones(shape.n_embd, dtype=np.float32)

    tensors: list[tuple[str, Any]] = []
    token_embd: np.ndarray[Any, Any] | None = None
    for tensor_name, tensor_shape in shape.tensor_shapes():
        if tensor_name == "token_embd.weight":
            token_embd = embed.view(tensor_shape)
            tensors.append((tensor_name, _rows_of(token_embd)))
        elif tensor_name == "output.weight":
            assert token_embd is not None
            output = _output_matrix(embed.same_place(token_embd, output_pool), shape, language_seed)
            tensors.append((tensor_name, output))
        elif tensor_name.endswith("norm.weight"):
            tensors.append((tensor_name, norm))
        elif tensor_name.endswith("ffn_down.weight"):
            tensors.append((tensor_name, _rows_of(in_ff.view(tensor_shape))))
        else:
            tensors.append((tensor_name, _rows_of(in_embd.view(tensor_shape))))

    path.parent.mkdir(parents=True, exist_ok=True)
    # A killed run leaves its copy (gigabytes for the large shapes) under a name no later run
    # reuses.
    remove_stale_partials(path.parent)

    def write(partial: Path) -> None:
        writer = gguf.GGUFWriter(str(partial), "llama")
        try:
            _write_metadata(writer, shape, dtype.upper(), name)
            for tensor_name, array in tensors:
                writer.add_tensor(tensor_name, array)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()

    # Whole, or not there: a loadable half-file is never left.
    replace_atomically(path, write, temporary=partial_path(path))
    return path


def _rows_of(matrix: np.ndarray[Any, Any]) -> _Rows:
    return _Rows((matrix.shape[0], matrix.shape[1]), matrix.dtype, lambda a, b: matrix[a:b])


def _output_matrix(
    scaled_embd: np.ndarray[Any, Any], shape: LlamaShape, language_seed: int
) -> _Rows:
    # Row j is the (rescaled) embedding of the token whose successor is j, so the logit of
    # succ(t) is |e_t|^2 while every other logit is a dot product of unrelated random vectors.
    succ = successor(shape.n_vocab, language_seed)
    predecessor = np.empty_like(succ)
    predecessor[succ] = np.arange(shape.n_vocab)
    # Specials and bytes are never predicted: a zero row's logit 0 loses to the successor's.
    never = _N_SPECIAL + _N_BYTES

    def rows(start: int, stop: int) -> np.ndarray[Any, Any]:
        block = scaled_embd[predecessor[start:stop]]
        block[: max(0, never - start)] = 0
        return block

    return _Rows((shape.n_vocab, shape.n_embd), scaled_embd.dtype, rows)


def _write_metadata(writer: Any, shape: LlamaShape, dtype: str, name: str) -> None:
    import gguf  # noqa: PLC0415

    writer.add_name(name)
    writer.add_file_type(
        int(gguf.LlamaFileType.MOSTLY_F16 if dtype == "F16" else gguf.LlamaFileType.ALL_F32)
    )
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(shape.n_vocab)
    tokens, scores, types = vocabulary(shape.n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(_CHAT_TEMPLATE)
