"""The layers a loaded model reports on a GPU (`/health`'s memory.target_gpu_layers) are the
ones llama.cpp offloaded, not the n_gpu_layers asked for (app/llama/facts.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.llama.config import ModelConfig
from app.llama.model import LlamaModel

_MIB = 1 << 20
ON_HOST = (("CPU_Mapped", 136 * _MIB),)
ON_GPU = (("CPU_Mapped", 20 * _MIB), ("CUDA0", 116 * _MIB))


def loaded(requested: int, placement: tuple[tuple[str, int], ...]) -> LlamaModel:
    """A model of 30 layers as llama.cpp would have loaded it, without llama.cpp."""
    model = object.__new__(LlamaModel)
    model.config = ModelConfig("smol.gguf", n_ctx=256, n_gpu_layers=requested)
    model.path, model.n_ctx, model.n_vocab = Path("smol.gguf"), 256, 49152
    model.placement = placement
    model._model = None
    model._lib = SimpleNamespace(  # type: ignore[assignment]
        llama_model_n_layer=lambda _m: 30,
        llama_model_n_embd=lambda _m: 576,
        llama_model_n_head=lambda _m: 9,
        llama_model_n_head_kv=lambda _m: 3,
        llama_model_n_ctx_train=lambda _m: 8192,
        llama_model_n_params=lambda _m: 134_515_008,
        llama_model_size=lambda _m: 136 * _MIB,
        llama_supports_gpu_offload=lambda: True,
    )
    return model


def test_a_build_that_cannot_offload_reports_no_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    model = loaded(-1, ())
    monkeypatch.setattr(model._lib, "llama_supports_gpu_offload", lambda: False)
    assert model.facts().n_gpu_layers == 0


def test_a_cpu_build_with_rpc_and_no_device_reports_no_layers() -> None:
    """llama_supports_gpu_offload() is true there, and llama.cpp says it offloaded them all."""
    assert loaded(-1, ON_HOST).facts().n_gpu_layers == 0


def test_an_offloading_build_reports_the_request_capped_at_the_layers() -> None:
    assert loaded(-1, ON_GPU).facts().n_gpu_layers == 30
    assert loaded(999, ON_GPU).facts().n_gpu_layers == 30
    assert loaded(12, ON_GPU).facts().n_gpu_layers == 12
    # No buffer line read: the build's word stands.
    assert loaded(12, ()).facts().n_gpu_layers == 12
