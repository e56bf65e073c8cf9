"""How one GGUF file is loaded into llama.cpp: the lowest layer's own settings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from app.errors import InvalidSettingError

# llama.cpp takes counts as C int32: anything larger would silently wrap in ctypes.
MAX_INT32 = 2**31 - 1
# More threads than any desktop has cores only adds scheduling overhead.
MAX_THREADS = 1024

# About 8,000 tokens of an 8B model's cache (128 KiB a token at f16), 45,000 of the demo target's.
DEFAULT_PROMPT_CACHE_MIB = 1024

FlashAttention = Literal["auto", "on", "off"]
FLASH_ATTENTION_CHOICES: tuple[FlashAttention, ...] = ("auto", "on", "off")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How one GGUF file is loaded into llama.cpp."""

    path: str
    n_ctx: int = 4096
    # -1 offloads every layer; 0 keeps the model on the CPU (also what a CPU-only build does).
    n_gpu_layers: int = -1
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int = 512
    # RPC workers ("host:port") that hold this model's offloaded layers; () keeps it local.
    rpc_servers: tuple[str, ...] = ()
    # A Jinja chat template used instead of the file's tokenizer.chat_template (llama-server's
    # --chat-template-file): for files whose template is missing, broken or lacks tools.
    chat_template: str | None = None
    # llama.cpp's flash attention. "auto": off for a model held in host memory, where on some
    # CPUs it attends a verification's rows several times slower (app/llama/facts.py), and
    # llama.cpp's own choice otherwise; on other CPUs it decodes faster deep in a context.
    flash_attn: FlashAttention = "auto"
    # Host memory for earlier conversations' KV cache states (app/llama/prompt_cache.py), as
    # llama-server's --cache-ram: a prompt sent again is restored, not re-read. 0 keeps none.
    prompt_cache_mib: int = DEFAULT_PROMPT_CACHE_MIB
    # A draft model decodes a token a pass. On a CPU with AMX, such a model held in host memory
    # reads in one-token passes too, which lets it use llama.cpp's AMX buffers safely
    # (app/llama/backend.one_token_buffers).
    one_token_passes: bool = False

    def for_draft(self, target_n_ctx: int) -> ModelConfig:
        """This config as a draft model beside a target is loaded: it never needs more context
        than the target (a smaller one saves KV memory); earlier conversations' states are kept
        for the target only (a hybrid reads a new conversation into its draft lazily, priced by
        the tokens the draft lacks); and it decodes one token a pass."""
        return replace(
            self,
            n_ctx=min(self.n_ctx, target_n_ctx),
            prompt_cache_mib=0,
            one_token_passes=True,
        )

    def validate(self, *, min_rows: int = 1) -> None:
        """`min_rows`: the rows one pass must hold (the engine asks for its longest
        verification, app.engine.config.check_model_config); llama.cpp caps a batch at n_ctx."""
        if not min_rows <= self.n_ctx <= MAX_INT32:
            raise InvalidSettingError(
                f"context size must be in {min_rows}..{MAX_INT32} tokens, got {self.n_ctx}"
            )
        if not -1 <= self.n_gpu_layers <= MAX_INT32:
            raise InvalidSettingError(
                f"GPU layers must be -1 (all), 0 (none) or a count up to {MAX_INT32}, "
                f"got {self.n_gpu_layers}"
            )
        if not min_rows <= self.n_batch <= MAX_INT32:
            raise InvalidSettingError(f"batch size must be in {min_rows}..{MAX_INT32}")
        if self.flash_attn not in FLASH_ATTENTION_CHOICES:
            raise InvalidSettingError(
                f"flash attention must be auto, on or off, got {self.flash_attn!r}"
            )
        if not 0 <= self.prompt_cache_mib <= MAX_INT32:
            raise InvalidSettingError(
                f"prompt cache must be 0 (none) or a size in MiB up to {MAX_INT32}, "
                f"got {self.prompt_cache_mib}"
            )
        for name, threads in (("threads", self.n_threads), ("batch threads", self.n_threads_batch)):
            if threads is not None and not 1 <= threads <= MAX_THREADS:
                raise InvalidSettingError(
                    f"{name} must be in 1..{MAX_THREADS} (or left out for automatic), got {threads}"
                )
