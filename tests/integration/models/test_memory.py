"""Memory estimates before loading, and the fit planner's advice."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from models import memory
from models.gguf import GGUFInfo, inspect_gguf
from models.memory import (
    DeviceMemory,
    SystemMemory,
    estimate_model_memory,
    kv_cache_bytes,
    plan_fit,
    process_vram_bytes,
    read_ram,
    read_vram,
)
from tests.helpers.model_files import bundled_q4_1

GIB = 1024**3
MIB = 1024**2


@pytest.fixture(scope="module")
def smol() -> GGUFInfo:
    return inspect_gguf(bundled_q4_1())


@pytest.mark.model
def test_kv_cache_formula(smol: GGUFInfo, gemma_model: Path) -> None:
    # 2 (K and V) · layers · n_ctx · kv heads · head dim · 2 bytes (f16)
    assert kv_cache_bytes(smol, 4096) == 2 * 30 * 4096 * 3 * 64 * 2 == 94_371_840
    assert kv_cache_bytes(smol, 4096, bytes_per_element=1) == 94_371_840 // 2
    gemma = inspect_gguf(gemma_model)
    assert kv_cache_bytes(gemma, 1000) == 18 * 1000 * 1 * (256 + 256) * 2


@pytest.mark.model
def test_gpu_layers_split_the_weights(smol: GGUFInfo) -> None:
    none = estimate_model_memory(smol, n_ctx=512, n_gpu_layers=0)
    assert none.gpu_weights_bytes == 0 and none.gpu_kv_bytes == 0 and none.gpu_bytes == 0
    every = estimate_model_memory(smol, n_ctx=512, n_gpu_layers=-1)
    assert every.n_gpu_layers == 31  # 30 layers + the output head
    assert every.gpu_kv_bytes == every.kv_bytes
    # Token embeddings stay in host memory; SmolLM2 ties them to the output head, which
    # llama.cpp then duplicates on the GPU.
    assert smol.tied_embeddings
    assert (
        every.gpu_weights_bytes == sum(smol.layer_bytes) + smol.output_bytes + smol.embedding_bytes
    )
    ten = estimate_model_memory(smol, n_ctx=512, n_gpu_layers=10)
    assert ten.gpu_weights_bytes == sum(smol.layer_bytes[-10:])
    assert ten.gpu_kv_bytes == ten.kv_bytes * 10 // 30
    assert none.gpu_bytes < ten.gpu_bytes < every.gpu_bytes
    assert ten.cpu_weights_bytes + ten.gpu_weights_bytes == ten.weights_bytes


class _FakeNvml:
    """NVML as pynvml exposes it, with two GPUs and this process on the second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.shut_down = 0

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=(handle + 1) * 8 * 2**30, free=(handle + 1) * 2**30)

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return f"GPU {handle}".encode()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        if handle == 0:
            return [SimpleNamespace(pid=self.pid + 1, usedGpuMemory=5 * 2**30)]
        return [SimpleNamespace(pid=self.pid, usedGpuMemory=3 * 2**30)]

    def nvmlShutdown(self) -> None:
        self.shut_down += 1


def test_vram_readouts_read_every_gpu_and_only_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeNvml(os.getpid())
    monkeypatch.setattr(memory, "_nvml", lambda: fake)
    gpus = read_vram()
    assert gpus is not None
    assert [(g.name, g.total_bytes, g.free_bytes) for g in gpus] == [
        ("GPU 0", 8 * 2**30, 2**30),
        ("GPU 1", 16 * 2**30, 2 * 2**30),
    ]
    assert process_vram_bytes() == 3 * 2**30  # the other process's 5 GiB is not ours
    assert fake.shut_down == 2


def test_without_a_driver_vram_reads_as_unknown_and_ram_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "_nvml", lambda: None)
    assert read_vram() is None and process_vram_bytes() is None
    total, available = read_ram()
    assert 0 < available <= total


@pytest.mark.model
def test_plan_fits_on_a_big_gpu(smol: GGUFInfo, demo_models: object) -> None:
    f32 = inspect_gguf(demo_models.f32)  # type: ignore[attr-defined]
    memory = SystemMemory(64 * GIB, 32 * GIB, (DeviceMemory(0, "Big GPU", 24 * GIB, 20 * GIB),))
    plan = plan_fit(f32, smol, n_ctx=4096, memory=memory)
    assert plan.fits and plan.fits_gpu and not plan.warnings
    assert plan.suggested_n_gpu_layers == -1 and plan.suggested_draft_n_gpu_layers == -1
    assert plan.gpu_needed_bytes == plan.target.gpu_bytes + plan.draft.gpu_bytes  # type: ignore[union-attr]


@pytest.mark.model
def test_plan_suggests_fewer_target_layers_when_vram_is_short(
    smol: GGUFInfo, demo_models: object
) -> None:
    f32 = inspect_gguf(demo_models.f32)  # type: ignore[attr-defined]
    headroom = 64 * MIB
    free = headroom + 400 * MIB  # the 540 MB F32 target cannot go whole, the draft can
    memory = SystemMemory(64 * GIB, 32 * GIB, (DeviceMemory(0, "Small GPU", 1 * GIB, free),))
    plan = plan_fit(f32, smol, n_ctx=2048, memory=memory, headroom_bytes=headroom)
    assert plan.fits_gpu is False and not plan.fits
    layers = plan.suggested_n_gpu_layers
    assert 0 < layers < 31
    assert plan.suggested_draft_n_gpu_layers == -1  # the draft stays whole on the GPU
    assert f"--n-gpu-layers {layers}" in plan.warnings[0]
    budget = free - headroom - plan.draft.gpu_bytes  # type: ignore[union-attr]
    fits = estimate_model_memory(f32, n_ctx=2048, n_gpu_layers=layers)
    too_many = estimate_model_memory(f32, n_ctx=2048, n_gpu_layers=layers + 1)
    assert fits.gpu_bytes <= budget < too_many.gpu_bytes
    # The advice, taken, fits.
    again = plan_fit(
        f32, smol, n_ctx=2048, n_gpu_layers=layers, memory=memory, headroom_bytes=headroom
    )
    assert again.fits and not again.warnings


@pytest.mark.model
def test_plan_without_gpu_checks_ram(smol: GGUFInfo) -> None:
    roomy = plan_fit(smol, smol, n_ctx=2048, memory=SystemMemory(16 * GIB, 8 * GIB, None))
    assert roomy.fits and roomy.fits_gpu is None and roomy.gpu_needed_bytes == 0
    assert roomy.suggested_n_gpu_layers == 0
    tight = plan_fit(smol, smol, n_ctx=2048, memory=SystemMemory(GIB, 100 * MIB, None))
    assert not tight.fits and "RAM" in tight.warnings[0]
