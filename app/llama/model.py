"""One llama.cpp model and context, driven through llama-cpp-python's low-level API.

The high-level `Llama` class is not used: it keeps logits for every context position when asked
for more than the last row, sizes its batch by n_ctx x n_seq_max, and hides the KV cache. Here the
KV cache always mirrors `self.tokens` (the ids it holds, in order). `feed()` takes the full token
history, keeps the longest common prefix already in the cache, drops the rest with
`llama_memory_seq_rm`, decodes only what is new, and returns logits for just the rows asked for.
That one primitive is prefill, plain decoding, draft steps, verification and rollback; when a
conversation comes back after another, it also restores that conversation's saved cache state
instead of decoding it again (app/llama/prompt_cache.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.errors import Cancelled, ContextOverflowError, KvCacheFullError, ModelLoadError
from app.llama import callbacks, rpc
from app.llama.backend import (
    buffer_lines,
    check_decoding_thread,
    ensure_backend,
    extra_buffers_safe,
    last_llama_error,
    recent_log_lines,
)
from app.llama.batches import batch_sizes
from app.llama.config import ModelConfig
from app.llama.facts import (
    ModelFacts,
    held_on_host,
    placement_of,
    precheck_model_file,
    read_facts,
    read_meta,
)
from app.llama.handle import common_prefix
from app.llama.pass_abort import stoppable_pass
from app.llama.prompt_cache import (
    MIN_RESTORE_GAIN,
    MIN_SAVED_TOKENS,
    PromptCache,
    restore_sequence,
    save_sequence,
)
from app.llama.threads import CoreGovernor, default_thread_count, shared_governor
from app.llama.token_text import TokenText
from app.llama.weights import load_weights, reads_one_token_a_pass

log = logging.getLogger(__name__)

# The fewest rows a pass computes while uniform_batches is set.
_MIN_UNIFORM_ROWS = 2
_SEQ = 0  # one sequence per context: chat, not batched serving
# Sequence ids a context takes: the most branches a token tree may have (app/llama/tree_feed.py).
MAX_BRANCHES = 8

LoadProgress = Callable[[float], bool]
"""Called with 0..1 while weights load; returning False cancels the load."""


class LlamaModel(TokenText):
    """A loaded GGUF model with its own context and KV cache."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        progress: LoadProgress | None = None,
        governor: CoreGovernor | None = None,
    ) -> None:
        config.validate()
        ensure_backend()
        import llama_cpp  # noqa: PLC0415

        self._lib = llama_cpp
        self.config = config
        self.path = Path(config.path)
        precheck_model_file(self.path)
        self._model: ctypes.c_void_p | None = None
        self._ctx: ctypes.c_void_p | None = None
        self._batch: object | None = None
        self.tokens: list[int] = []
        # Where the last decoding call began: tokens before it were settled by earlier calls,
        # so dropping them starts another conversation, not a speculative rollback.
        self._settled = 0
        # How much of the last feed's history the cache held when it began, live or restored
        # from the prompt cache (rows decoded again for their logits included): cache_n. A
        # prompt read in parts (app/engine/prompt_pass.py) sets it to the whole pass's.
        self.reused = 0
        self._prompt_cache = PromptCache(config.prompt_cache_mib * 2**20)
        self._piece_cache: dict[int, bytes] = {}
        # A thread count the user chose is kept as it is; otherwise llama.cpp gets the cores
        # other processes leave free (app/llama/threads.py).
        self._governor = (
            None if config.n_threads or config.n_threads_batch else (governor or shared_governor())
        )
        self.threads = 0  # set with the context; what the next decode runs with
        # llama.cpp's CPU backend multiplies one row with its vector kernels and two or more with
        # its tiled GEMM, and the two round differently (logits apart by up to ~0.02 on the demo
        # target). Rows computed in any batch of two or more are bit-identical, whatever the
        # batch size. So when set, every pass computes at least two rows (a plain step re-decodes
        # the previous token too): plain and speculative decoding then do identical arithmetic,
        # at 1.2-1.4x the cost of a one-row plain step on a CPU. Owners reset the cache when
        # they flip it, so no row computed the other way stays behind.
        self.uniform_batches = False
        # While set, reading passes stop once its first byte is not 0, raising Cancelled with
        # their rows dropped (app/llama/pass_abort.py; app/engine/prompt_pass.py sets it).
        self.stop_byte: bytearray | None = None

        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0x7FFFFFFF if config.n_gpu_layers < 0 else config.n_gpu_layers
        self.one_token_passes = reads_one_token_a_pass(config)
        model_params.use_extra_bufts = extra_buffers_safe() or self.one_token_passes
        for endpoint in config.rpc_servers:
            rpc.add_server(endpoint)
        devices = rpc.model_devices(config.rpc_servers)
        if devices is not None:
            model_params.devices = ctypes.addressof(devices)
        cancelled = False

        @callbacks.native_callback
        def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
            nonlocal cancelled
            keep_going = progress is None or bool(progress(float(fraction)))
            cancelled = not keep_going
            # A signal that came during the load ends it now (app/llama/callbacks.py).
            return keep_going and not callbacks.deferred()

        self._progress_cb = llama_cpp.llama_progress_callback(on_progress)
        model_params.progress_callback = self._progress_cb
        recent_log_lines.clear()
        buffer_lines.clear()
        self._model = load_weights(llama_cpp, str(self.path), model_params)
        self.placement = placement_of(buffer_lines)
        if callbacks.deferred():
            self.close()
            callbacks.raise_deferred()
        if not self._model:
            if cancelled:
                raise Cancelled("model loading cancelled")
            raise ModelLoadError(str(self.path), last_llama_error())
        try:
            self._init_context(config)
            callbacks.raise_deferred()  # a signal while llama.cpp logged the context's set-up
        except BaseException:
            self.close()
            raise
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_ctx = int(llama_cpp.llama_n_ctx(self._ctx))
        # llama.cpp rounds n_ctx up (to a multiple of 256) but caps the batch at the n_ctx asked
        # for; a decode larger than its batch aborts the process, so chunk by what it set.
        # (llama.cpp asserts on contexts of a batch under a few tokens: one-token passes are
        # this chunking's, not the context's.)
        self.n_batch = 1 if self.one_token_passes else int(llama_cpp.llama_n_batch(self._ctx))
        self._eog_ids = frozenset(
            t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self.vocab, t)
        )

    def _init_context(self, config: ModelConfig) -> None:
        lib = self._lib
        params = lib.llama_context_default_params()
        params.n_ctx = config.n_ctx
        params.n_batch = config.n_batch
        params.n_ubatch = config.n_batch
        threads = config.n_threads or default_thread_count()
        params.n_threads = threads
        params.n_threads_batch = config.n_threads_batch or threads
        self.threads = threads
        params.no_perf = True
        params.flash_attn_type = {
            "on": lib.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            "off": lib.LLAMA_FLASH_ATTN_TYPE_DISABLED,
            "auto": lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
            if held_on_host(self.placement)
            else lib.LLAMA_FLASH_ATTN_TYPE_AUTO,
        }[config.flash_attn]
        # One unified cache: tree branches share n_ctx, and extra sequence ids cost no memory.
        params.n_seq_max = MAX_BRANCHES
        params.kv_unified = True
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise ModelLoadError(
                str(self.path), f"could not create a context of {config.n_ctx} tokens"
            )
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(config.n_batch, 0, 1)

    # -- metadata -----------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        return read_meta(self._lib, self._model, key)

    def facts(self) -> ModelFacts:
        return read_facts(
            self._lib,
            self._model,
            path=str(self.path),
            n_vocab=self.n_vocab,
            n_ctx=self.n_ctx,
            requested_gpu_layers=self.config.n_gpu_layers,
            placement=self.placement,
        )

    # -- decoding -----------------------------------------------------------------------------

    def feed(self, history: Sequence[int], n_logits: int) -> npt.NDArray[np.float32]:
        """Make the cache hold exactly `history` and return logits of its last n_logits rows.

        Row j of the result predicts the token after history[len(history) - n_logits + j].
        Returns an array of shape (n_logits, n_vocab), copied out of llama.cpp's buffer.
        """
        n_hist = len(history)
        if n_hist > self.n_ctx:
            raise ContextOverflowError(n_hist, self.n_ctx)
        if n_logits > n_hist:
            raise ValueError("cannot return logits for more rows than the history has")
        n_rows = n_logits
        if self.uniform_batches and n_logits > 0:
            n_rows = min(max(n_logits, _MIN_UNIFORM_ROWS), n_hist)
        keep = common_prefix(self.tokens, history)
        if n_hist - keep > MIN_RESTORE_GAIN and self._prompt_cache.budget_bytes:
            keep = self._restore_longer(history, keep)
        held = keep
        # Rows we need logits for must be decoded now, even if the cache already holds them.
        keep = min(keep, n_hist - n_rows)
        if self.uniform_batches and 0 < n_hist - keep < _MIN_UNIFORM_ROWS:
            # Re-decode a cached token rather than run a one-row pass (see uniform_batches).
            keep = max(0, n_hist - _MIN_UNIFORM_ROWS)
        self.truncate(keep)
        started_over = len(self.tokens) < keep  # a cache that cannot drop a suffix starts over
        keep = min(keep, len(self.tokens))
        self.reused = 0 if started_over else held
        pending = history[keep:]
        if not pending:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        self._fit_threads()
        start = 0
        last_at_least = max(n_rows, _MIN_UNIFORM_ROWS if self.uniform_batches else 1)
        try:
            for size in batch_sizes(len(pending), last_at_least, self.n_batch):
                chunk = pending[start : start + size]
                last_chunk = start + size == len(pending)
                self._decode(chunk, keep + start, min(n_rows, size) if last_chunk else 0)
                start += size
        except BaseException:
            # Earlier chunks of this call are in the cache but not yet in `tokens`; drop
            # everything this call decoded so the cache holds exactly `tokens` again.
            self._forget_from(keep)
            raise
        self.tokens.extend(pending)
        self._settled = keep
        if n_logits == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        ptr = self._lib.llama_get_logits(self._ctx)
        rows = np.ctypeslib.as_array(ptr, shape=(n_rows * self.n_vocab,))
        return rows.reshape(n_rows, self.n_vocab)[n_rows - n_logits :].copy()

    def held_for(self, history: Sequence[int]) -> int:
        """How many of history's first tokens feed(history, …) would not decode again: the
        cache's common prefix, or what the saved state it would restore holds."""
        held = common_prefix(self.tokens, history)
        if len(history) - held > MIN_RESTORE_GAIN and self._prompt_cache.budget_bytes:
            found = self._prompt_cache.find(history, beyond=held + MIN_RESTORE_GAIN)
            if found is not None:
                held = found[1]
        return held

    def _fit_threads(self) -> None:
        if self._governor is None:
            return
        threads = self._governor.free_cores()
        if threads != self.threads:
            self._lib.llama_set_n_threads(self._ctx, threads, threads)
            self.threads = threads

    def truncate(self, n_keep: int) -> None:
        """Forget every cached token from position n_keep on."""
        if n_keep >= len(self.tokens):
            return
        if n_keep < self._settled:
            self._save_live()
        self._forget_from(n_keep)

    @property
    def prompt_cache(self) -> PromptCache:
        """Earlier conversations' cache states kept in host memory (app/llama/prompt_cache.py)."""
        return self._prompt_cache

    def _save_live(self) -> None:
        """Keep the cache's state before it drops another conversation's settled tokens."""
        if not self._prompt_cache.budget_bytes or len(self.tokens) < MIN_SAVED_TOKENS:
            return
        state = save_sequence(self._lib, self._ctx, _SEQ)
        if state is not None:
            self._prompt_cache.add(self.tokens, state)
        self._settled = 0

    def _restore_longer(self, history: Sequence[int], held: int) -> int:
        """Restore a saved state that holds more of `history` than the cache's `held` tokens;
        returns how many the cache holds now."""
        found = self._prompt_cache.find(history, beyond=held + MIN_RESTORE_GAIN)
        if found is None:
            return held
        saved, restored = found
        if held < self._settled:
            self._save_live()
        self._lib.llama_memory_seq_rm(self._memory, _SEQ, -1, -1)
        self.tokens.clear()
        self._settled = 0
        if not restore_sequence(self._lib, self._ctx, saved.state, _SEQ):
            self._prompt_cache.discard(saved)
            self._lib.llama_memory_seq_rm(self._memory, _SEQ, -1, -1)
            return 0
        self.tokens.extend(saved.tokens)
        return restored

    def _forget_from(self, position: int) -> None:
        """Drop cache rows from `position` on, whether or not `tokens` lists them yet."""
        if not self._lib.llama_memory_seq_rm(self._memory, _SEQ, position, -1):
            # Recurrent models cannot drop a suffix; start over rather than corrupt the cache.
            self._lib.llama_memory_clear(self._memory, True)
            del self.tokens[:]
            return
        del self.tokens[position:]

    def reset(self) -> None:
        """Empty the cache, saved states included: the next prompt is read from scratch."""
        if self._ctx is not None:
            self._lib.llama_memory_clear(self._memory, True)
        self.tokens.clear()
        self._settled = 0
        self._prompt_cache.clear()

    def _decode(self, chunk: Sequence[int], start_pos: int, n_outputs: int) -> None:
        batch = self._batch
        assert batch is not None
        n = len(chunk)
        first_output = n - n_outputs
        for i, token in enumerate(chunk):
            batch.token[i] = token  # type: ignore[attr-defined]
            batch.pos[i] = start_pos + i  # type: ignore[attr-defined]
            batch.n_seq_id[i] = 1  # type: ignore[attr-defined]
            batch.seq_id[i][0] = _SEQ  # type: ignore[attr-defined]
            batch.logits[i] = 1 if i >= first_output else 0  # type: ignore[attr-defined]
        batch.n_tokens = n  # type: ignore[attr-defined]
        check_decoding_thread()
        with stoppable_pass(self._lib, self._ctx, n, n_outputs, self.stop_byte):
            rc = self._lib.llama_decode(self._ctx, batch)
        if rc != 0:
            # The caller (feed) drops whatever part of this call reached the cache.
            if rc == 1:
                raise KvCacheFullError(start_pos, n, self.n_ctx)
            if rc == 2:  # aborted: a signal's exception waits, or a stop was asked for
                callbacks.raise_deferred()
                raise Cancelled("stopped in the middle of reading")
            raise RuntimeError(f"llama_decode failed with code {rc}")

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Free native memory now (VRAM included); safe to call twice or after a failed init."""
        lib = self._lib
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            lib.llama_model_free(self._model)
            self._model = None
        self.tokens = []
        self._prompt_cache.clear()

    @property
    def closed(self) -> bool:
        return self._model is None

    def __enter__(self) -> LlamaModel:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # backstop only; owners call close() explicitly
        # At interpreter shutdown ctypes may already be gone; nothing useful can be done then.
        with contextlib.suppress(Exception):
            self.close()
