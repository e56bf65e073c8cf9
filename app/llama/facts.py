"""What a model file and a loaded model say about themselves, before and after llama.cpp."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import A_FOLDER, EMPTY_FILE, NO_SUCH_FILE, NOT_GGUF, NOT_REGULAR, ModelLoadError
from app.llama import rpc
from app.llama.backend import BUFFER_LINE

GGUF_MAGIC = b"GGUF"


def precheck_model_file(path: Path) -> None:
    """Fail fast, in words, on the common bad inputs before handing the file to llama.cpp."""
    if not path.exists():
        raise ModelLoadError(str(path), NO_SUCH_FILE)
    if path.is_dir():
        raise ModelLoadError(str(path), A_FOLDER)
    if not path.is_file():  # a FIFO or a device would block or stream forever once opened
        raise ModelLoadError(str(path), NOT_REGULAR)
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ModelLoadError(str(path), f"cannot read it ({exc.strerror})") from exc
    if size == 0:
        raise ModelLoadError(str(path), EMPTY_FILE)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(str(path), NOT_GGUF)


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the loaded model says about itself; used for memory readouts and compatibility."""

    path: str
    n_vocab: int
    n_ctx: int
    n_ctx_train: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_params: int
    weights_bytes: int
    kv_cache_bytes: int
    n_gpu_layers: int  # repeating layers llama.cpp put on a GPU or an RPC worker (offloaded_layers)
    # Where llama.cpp put the weights: (buffer name, bytes), e.g. ("RPC0[10.0.0.2:50052]", ...).
    placement: tuple[tuple[str, int], ...] = ()

    def context_note(self) -> str | None:
        """A word for a context larger than the model was trained on: llama.cpp runs it, but
        past that length a model without context extension loses track (llama-server warns
        the same way). None when it fits, or the file does not say."""
        if self.n_ctx_train <= 0 or self.n_ctx <= self.n_ctx_train:
            return None
        name = Path(self.path).name
        return (
            f"the context ({self.n_ctx} tokens) is larger than {name} was trained on "
            f"({self.n_ctx_train}); replies past that length may lose track"
        )


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    """Bytes held by each model, so the draft's own cost in memory is visible."""

    target_weights: int
    target_kv: int
    draft_weights: int
    draft_kv: int
    target_gpu_layers: int
    draft_gpu_layers: int
    # Earlier conversations' cache states the target keeps in host memory (its prompt cache,
    # app/llama/prompt_cache.py): they grow with use, so they are read after every reply, not
    # at load like the rest, and never count against a GPU.
    target_saved: int = 0

    @property
    def total(self) -> int:
        return self.target_weights + self.target_kv + self.draft_weights + self.draft_kv


NO_MEMORY = MemoryUsage(0, 0, 0, 0, 0, 0)  # nothing loaded


def placement_of(lines: Sequence[str]) -> tuple[tuple[str, int], ...]:
    found: list[tuple[str, int]] = []
    for line in lines:
        match = BUFFER_LINE.search(line)
        if match:
            name = rpc.public_name(match.group(1))  # a tunnel's 127.0.0.1 -> the worker's
            found.append((name, int(float(match.group(2)) * 1024 * 1024)))
    return tuple(found)


# Buffer names of weights in host memory, run by the CPU backend (with or without its AMX or
# repacked kernels); a GPU's or an RPC worker's buffers are named after the device.
_HOST_BUFFERS = ("CPU", "AMX", "KLEIDIAI")


def held_on_host(placement: Sequence[tuple[str, int]]) -> bool:
    """Whether every weight buffer is in host memory, so attention runs on the CPU.

    There llama.cpp's flash attention is kept off: its CPU kernel attends a verification's few
    query rows one by one, reading the whole KV cache again for each row and head (at the vendored
    commit 0c1e570 it tiles query rows only from 64 a pass, GGML_FA_TILE_Q, and splits the cache
    across threads only for one row), so with speculation on, the default, it loses once the
    context holds a few hundred tokens; worth measuring again when that threshold drops. The demo
    target, 2 threads: on an Intel AMX machine (llama-bench) one row at depth 1000 ran 29.1 t/s
    with it against 38.3 without, 17 rows 75 against 253; on an AMD EPYC with AVX-512
    (scripts/flash_attention_depths.py) one row runs 3-10 % faster with it, but 17 rows 1.2× slower
    at depth 400 and 1.5× at 2,000; an earlier EPYC gained most (one row at depth 1000 36.3 t/s
    against 26.6) and lost least (17 rows 150 against 159). It reads a long prompt faster (512
    tokens: 814 t/s against 625 on the AMX machine), but a reply spends most of its time in those
    small passes. Anything offloaded keeps llama.cpp's own choice; `--flash-attn on` overrides.
    """
    return bool(placement) and all(name.upper().startswith(_HOST_BUFFERS) for name, _ in placement)


def offloaded_layers(
    requested: int, n_layer: int, placement: Sequence[tuple[str, int]], *, offload_supported: bool
) -> int:
    """How many of the model's `n_layer` repeating layers llama.cpp put on a GPU or an RPC
    worker, `requested` being the n_gpu_layers asked for (-1: all).

    A build that cannot offload keeps every layer in host memory whatever was asked. One that
    can may still have no device to put them on: llama_supports_gpu_offload() is also true for
    a CPU build with the RPC backend, and llama.cpp then logs "offloaded 31/31 layers to GPU"
    for weights that all sit in its CPU buffers. The buffers the weights went to settle it."""
    if not offload_supported or held_on_host(placement):
        return 0
    return n_layer if requested < 0 else min(requested, n_layer)


def read_meta(lib: Any, model: Any, key: str) -> str | None:
    """A GGUF metadata value of a loaded model as text; None when it has none."""
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    if n < 0:
        return None
    if n >= len(buf):  # the chat template can be long; ask again with room for it
        buf = ctypes.create_string_buffer(n + 1)
        lib.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def read_facts(
    lib: Any,
    model: Any,
    *,
    path: str,
    n_vocab: int,
    n_ctx: int,
    requested_gpu_layers: int,
    placement: tuple[tuple[str, int], ...],
) -> ModelFacts:
    """What a loaded model is, read through llama.cpp's model API (`lib`, the llama_cpp
    module; `model`, its llama_model pointer)."""
    n_layer = int(lib.llama_model_n_layer(model))
    n_embd = int(lib.llama_model_n_embd(model))
    n_head = int(lib.llama_model_n_head(model))
    n_head_kv = int(lib.llama_model_n_head_kv(model))
    head_dim = n_embd // max(n_head, 1)
    # K and V, f16 (llama.cpp's default cache type), for every layer and context cell.
    kv_bytes = 2 * n_layer * n_ctx * n_head_kv * head_dim * 2
    offload = bool(lib.llama_supports_gpu_offload())
    return ModelFacts(
        path=path,
        n_vocab=n_vocab,
        n_ctx=n_ctx,
        n_ctx_train=int(lib.llama_model_n_ctx_train(model)),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_params=int(lib.llama_model_n_params(model)),
        weights_bytes=int(lib.llama_model_size(model)),
        kv_cache_bytes=kv_bytes,
        n_gpu_layers=offloaded_layers(
            requested_gpu_layers, n_layer, placement, offload_supported=offload
        ),
        placement=placement,
    )
