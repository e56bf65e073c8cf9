"""What a GGUF file is, from its header alone: no weights are loaded.

`inspect_gguf(path)` returns a frozen `GGUFInfo` (architecture, size, quantization, shape numbers,
the tokenizer and its fingerprint, the chat template) or raises `ModelLoadError` whose reason is a
few plain words ("the file is empty", "not a GGUF file (...)", "file is truncated ...", "layer
count (block_count) 0 is out of range ..."). No other exception type escapes, whatever the bytes
on disk, and a hostile header costs bounded time and memory: a bounded scan and vetting first,
then the full read.
"""

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
