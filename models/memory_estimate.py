"""What one model will take before it is loaded, from its GGUF header (see
`GGUFInfo.layer_bytes`), placed the way llama.cpp places tensors: with `n_gpu_layers = L`, the
last L repeating layers go to the GPU; the output head goes too once L exceeds the layer count
(or L = -1, "all"); token embeddings stay in host memory. The KV cache of an offloaded layer
lives on the GPU. KV bytes per model:

    n_layers · n_ctx · n_head_kv · (head_dim_k + head_dim_v) · bytes per element

which is the familiar `2 · n_layers · n_ctx · n_head_kv · head_dim · 2` for an f16 cache.
A rough compute-buffer allowance is added (llama.cpp's graph scratch grows with the vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass

from models.gguf import GGUFInfo

DEFAULT_N_UBATCH = 512
F16_BYTES = 2.0


def kv_cache_bytes(info: GGUFInfo, n_ctx: int, *, bytes_per_element: float = F16_BYTES) -> int:
    """KV cache for `n_ctx` tokens (all layers)."""
    if n_ctx < 0:
        raise ValueError("n_ctx must not be negative")
    layers = info.n_layers or 0
    heads = info.n_head_kv or 0
    dims = (info.head_dim_k or 0) + (info.head_dim_v or 0)
    return int(layers * n_ctx * heads * dims * bytes_per_element)


def _compute_bytes(info: GGUFInfo, n_ubatch: int = DEFAULT_N_UBATCH) -> int:
    # Logits and a few activations for one micro-batch, float32: a rough allowance, not a promise.
    return int(4 * n_ubatch * (info.vocab_size + 8 * (info.n_embd or 0)))


def _resolve_layers(n_gpu_layers: int, n_layers: int) -> int:
    """llama.cpp's meaning: -1 (or any negative) = everything, including the output head."""
    if n_gpu_layers < 0:
        return n_layers + 1
    return min(n_gpu_layers, n_layers + 1)


@dataclass(frozen=True)
class ModelMemory:
    """Where one model's bytes will go."""

    n_layers: int
    n_gpu_layers: int  # resolved: 0..n_layers+1 (n_layers+1 = every layer and the output head)
    weights_bytes: int
    gpu_weights_bytes: int
    kv_bytes: int
    gpu_kv_bytes: int
    compute_bytes: int

    @property
    def cpu_weights_bytes(self) -> int:
        return self.weights_bytes - self.gpu_weights_bytes

    @property
    def cpu_kv_bytes(self) -> int:
        return self.kv_bytes - self.gpu_kv_bytes

    @property
    def gpu_bytes(self) -> int:
        gpu_compute = self.compute_bytes if self.n_gpu_layers > 0 else 0
        return self.gpu_weights_bytes + self.gpu_kv_bytes + gpu_compute

    @property
    def cpu_bytes(self) -> int:
        cpu_compute = self.compute_bytes if self.n_gpu_layers == 0 else 0
        return self.cpu_weights_bytes + self.cpu_kv_bytes + cpu_compute

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes


def estimate_model_memory(
    info: GGUFInfo,
    *,
    n_ctx: int,
    n_gpu_layers: int = -1,
    kv_bytes_per_element: float = F16_BYTES,
) -> ModelMemory:
    """Split one model's weights and KV cache between GPU and host for `n_gpu_layers`."""
    n_layers = info.n_layers or len(info.layer_bytes)
    offloaded = _resolve_layers(n_gpu_layers, n_layers)
    layer_bytes = list(info.layer_bytes) or [0] * n_layers
    gpu_layers = min(offloaded, n_layers)
    gpu_weights = sum(layer_bytes[n_layers - gpu_layers :]) if gpu_layers else 0
    if offloaded > n_layers:
        gpu_weights += info.output_bytes
        if info.tied_embeddings:
            gpu_weights += info.embedding_bytes  # llama.cpp duplicates the tied matrix for output
    weights = info.tensor_bytes
    if offloaded > n_layers and info.tied_embeddings:
        weights += info.embedding_bytes
    kv = kv_cache_bytes(info, n_ctx, bytes_per_element=kv_bytes_per_element)
    gpu_kv = kv * gpu_layers // n_layers if n_layers else 0
    return ModelMemory(
        n_layers=n_layers,
        n_gpu_layers=offloaded,
        weights_bytes=weights,
        gpu_weights_bytes=gpu_weights,
        kv_bytes=kv,
        gpu_kv_bytes=gpu_kv,
        compute_bytes=_compute_bytes(info),
    )
