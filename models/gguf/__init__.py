"""GGUF headers: a bounded scan and vetting, then the full read (`inspect_gguf`)."""

from models.gguf.header import clear_inspect_cache, inspect_gguf
from models.gguf.info import GGUFInfo
from models.gguf.layout import is_shard_path, shard_info
from models.gguf.tokens import TokenTable, tokenizer_fingerprint

__all__ = [
    "GGUFInfo",
    "TokenTable",
    "clear_inspect_cache",
    "inspect_gguf",
    "is_shard_path",
    "shard_info",
    "tokenizer_fingerprint",
]
