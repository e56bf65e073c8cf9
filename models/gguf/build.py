"""Build a `GGUFInfo` from a scanned header: shape numbers, tokenizer, special tokens, bytes."""

from __future__ import annotations

import os
import re
from pathlib import Path

from models.gguf.info import GGUFInfo
from models.gguf.layout import other_parts, split_bytes, tensor_rows
from models.gguf.reader import quantization_name, read_bool, read_int, read_str
from models.gguf.scan import HeaderScan
from models.gguf.tokens import VOCAB_DEFAULTS, tokenizer_fingerprint

__all__ = ["build_info", "display_name"]

# A quantization at the end of a file name: "….Q4_1", "-Q4_K_M", "_f16", ".IQ3_XXS", "-bf16".
_QUANT_SUFFIX = re.compile(r"[._-](?:I?Q\d[\w]*|F16|F32|BF16)$", re.IGNORECASE)

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


def build_info(path: Path, scan: HeaderScan, st: os.stat_result) -> GGUFInfo:
    arch = read_str(scan, "general.architecture") or "unknown"
    kind = read_str(scan, "general.type") or ("mmproj" if arch == "clip" else "model")

    def arch_int(suffix: str) -> int | None:
        return read_int(scan, f"{arch}.{suffix}")

    n_embd = arch_int("embedding_length")
    n_head = arch_int("attention.head_count")
    n_head_kv = arch_int("attention.head_count_kv")
    if n_head_kv is None:
        n_head_kv = n_head
    default_head_dim = n_embd // n_head if n_embd and n_head else None
    head_dim_k = arch_int("attention.key_length") or default_head_dim
    head_dim_v = arch_int("attention.value_length") or head_dim_k

    tokens = scan.tokens
    vocab_type = read_str(scan, "tokenizer.ggml.model")
    pre = read_str(scan, "tokenizer.ggml.pre")
    bos_default, eos_default, add_bos_default, add_eos_default = VOCAB_DEFAULTS.get(
        vocab_type or "", (None, None, False, False)
    )
    if vocab_type == "gpt2" and pre in _BPE_PRE_ADD_BOS:
        add_bos_default = True
    if vocab_type == "gpt2" and pre in ("glm4", "chatglm-bpe"):
        bos_default = None
    bos = read_int(scan, "tokenizer.ggml.bos_token_id")
    eos = read_int(scan, "tokenizer.ggml.eos_token_id")
    bos = bos_default if bos is None else bos
    eos = eos_default if eos is None else eos
    add_bos = read_bool(scan, "tokenizer.ggml.add_bos_token")
    add_eos = read_bool(scan, "tokenizer.ggml.add_eos_token")
    add_bos = add_bos_default if add_bos is None else add_bos
    add_eos = add_eos_default if add_eos is None else add_eos

    file_type = read_int(scan, "general.file_type")
    shard_count = read_int(scan, "split.count") or 1
    template = read_str(scan, "tokenizer.chat_template")
    name = display_name(read_str(scan, "general.name"), read_str(scan, "general.finetune"), path)

    rows = tensor_rows(scan)
    total_size = int(st.st_size)
    if shard_count > 1:
        extra_rows, extra_size = other_parts(path, shard_count)
        rows.extend(extra_rows)
        total_size += extra_size
    n_layers = arch_int("block_count")
    split = split_bytes(rows, n_layers)

    return GGUFInfo(
        path=path,
        size_bytes=int(st.st_size),
        total_size_bytes=total_size,
        mtime=float(st.st_mtime),
        gguf_version=scan.version,
        architecture=arch,
        name=name,
        kind=kind,
        size_label=read_str(scan, "general.size_label"),
        parameter_count=sum(elements for _name, elements, _bytes in rows),
        tensor_count=len(rows),
        quantization=quantization_name(file_type, scan),
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


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def display_name(general_name: str | None, finetune: str | None, path: Path) -> str:
    """What to call a model: its general.name, unless that is only a training run's tag.

    Converters build general.name from the fine-tune field, so a file whose fine-tune is a
    run tag ("8k-lc100k-mix1-ep2") gets a name like "Smollm2 135M 8k Lc100K Mix1 Ep2" that
    every quantization shares; the file's own name (less its quantization) says more then.
    """
    stem = _QUANT_SUFFIX.sub("", path.stem) or path.stem
    if not general_name:
        return stem
    if (
        finetune
        and any(ch.isdigit() for ch in finetune)
        and _words(finetune) in _words(general_name)
    ):
        return stem
    return general_name
