"""`GGUFInfo`: what a GGUF file holds, as read from its header."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.gguf.tokens import VOCAB_DEFAULTS, TokenTable

__all__ = ["GGUFInfo"]


@dataclass(frozen=True)
class GGUFInfo:
    """What a GGUF file holds, read from its header. `tokens` is kept out of repr and equality."""

    path: Path
    size_bytes: int  # this file
    # A model's size on disk, all parts of a split model (= size_bytes for a single file): what
    # every size comparison and ratio between models uses.
    total_size_bytes: int
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
    def problem(self) -> str | None:
        """Why this file cannot be loaded as a chat model, in words; None when it can."""
        if self.kind != "model":
            return f"not a language model ({self.kind} file)"
        if self.tensor_count == 0:
            # llama.cpp's own ggml-vocab-*.gguf files are such: a tokenizer, no model.
            return "no weights (a vocabulary-only file)"
        if self.n_layers is None:
            return f"no layer count in the header ({self.architecture}.block_count)"
        if self.vocab_type is None or self.vocab_type not in VOCAB_DEFAULTS:
            return f"unsupported tokenizer model {self.vocab_type or 'missing'!r}"
        if not self.has_vocab:
            return "the vocabulary is empty"
        return None

    @property
    def is_model(self) -> bool:
        """A loadable language model (not a LoRA adapter or a vision projector)."""
        return self.problem is None

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
            "problem": self.problem,
        }
        if include_template:
            out["chat_template"] = self.chat_template
        return out
