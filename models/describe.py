"""A model file's header in words, shared by `specchat models inspect` and the Models dialog."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.gguf import GGUFInfo


def format_params(n: int) -> str:
    """134515008 -> '135M': two significant digits below ten units, whole units above."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{unit}" if n < div * 10 else f"{n / div:.0f}{unit}"
    return str(n)


def detail_rows(info: GGUFInfo, *, missing: str = "—") -> list[tuple[str, str]]:
    """(label, value) rows describing one GGUF file; `missing` stands for absent header keys."""
    from models.memory import format_bytes  # noqa: PLC0415 - gguf loads only when needed

    def opt(value: object) -> str:
        return missing if value is None else str(value)

    vocab = f"{info.vocab_type or missing} ({info.tokenizer_pre or missing}), "
    vocab += f"{info.vocab_size} tokens"
    size = format_bytes(info.size_bytes)
    if info.shard_count > 1:
        size += f" (first of {info.shard_count} parts; {format_bytes(info.total_size_bytes)} total)"
    return [
        ("path", str(info.path)),
        ("name", info.name),
        ("kind", info.kind),
        ("architecture", info.architecture),
        ("parameters", f"{format_params(info.parameter_count)} ({info.parameter_count:,})"),
        ("quantization", info.quantization),
        ("size", size),
        ("context length", opt(info.context_length)),
        ("layers", opt(info.n_layers)),
        ("embedding", opt(info.n_embd)),
        ("heads / kv heads", f"{opt(info.n_head)} / {opt(info.n_head_kv)}"),
        ("vocabulary", vocab),
        ("BOS", f"id {opt(info.bos_token_id)}, {'added' if info.add_bos else 'not added'}"),
        ("EOS", f"id {opt(info.eos_token_id)}, {'added' if info.add_eos else 'not added'}"),
        ("chat template", "yes" if info.has_chat_template else "no"),
        ("tokenizer", info.tokenizer_fingerprint[:16]),
        ("GGUF version", str(info.gguf_version)),
    ]
