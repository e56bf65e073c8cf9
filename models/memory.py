"""Memory before loading: what the machine has, and whether the target and the draft fit.

What each model will take is estimated in models.memory_estimate (re-exported here).
`read_vram()` asks the NVIDIA driver through pynvml and answers None when there is no driver;
`read_ram()` uses psutil. `plan_fit()` puts both together: does it fit, and if not, the largest
target GPU-layer count that does.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

import psutil

from app.llama.resources import format_bytes
from models.gguf import GGUFInfo
from models.memory_estimate import F16_BYTES, ModelMemory, estimate_model_memory, kv_cache_bytes

__all__ = [
    "DEFAULT_HEADROOM_BYTES",
    "DeviceMemory",
    "FitPlan",
    "ModelMemory",
    "SystemMemory",
    "estimate_model_memory",
    "format_bytes",
    "kv_cache_bytes",
    "plan_fit",
    "process_vram_bytes",
    "read_ram",
    "read_vram",
    "system_memory",
]

DEFAULT_HEADROOM_BYTES = 512 * 1024**2  # keep this much VRAM free for the driver and other apps


# --------------------------------------------------------------------------------------------
# What the machine has


@dataclass(frozen=True)
class DeviceMemory:
    index: int
    name: str
    total_bytes: int
    free_bytes: int

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.free_bytes


@dataclass(frozen=True)
class SystemMemory:
    ram_total_bytes: int
    ram_available_bytes: int
    gpus: tuple[DeviceMemory, ...] | None  # None: no NVIDIA driver (or no pynvml)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def vram_free_bytes(self) -> int | None:
        return self.gpus[0].free_bytes if self.gpus else None

    @property
    def vram_total_bytes(self) -> int | None:
        return self.gpus[0].total_bytes if self.gpus else None


def _nvml() -> Any | None:
    try:
        import pynvml  # noqa: PLC0415 - optional at run time: no NVIDIA driver on many machines

        pynvml.nvmlInit()
    except Exception:  # NVMLError (no driver/library), ImportError, OSError
        return None
    return pynvml


def read_vram() -> tuple[DeviceMemory, ...] | None:
    """Free and total memory of every NVIDIA GPU, or None when there is no usable driver."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        devices = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            name = nvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode("utf-8", errors="replace")
            devices.append(DeviceMemory(index, str(name), int(mem.total), int(mem.free)))
        return tuple(devices)
    except Exception:  # a driver hiccup must not break a memory readout
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def process_vram_bytes(pid: int | None = None) -> int | None:
    """GPU memory used by one process (this one by default) summed over GPUs; None if unknown."""
    nvml = _nvml()
    if nvml is None:
        return None
    pid = os.getpid() if pid is None else pid
    try:
        total = 0
        found = False
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if int(proc.pid) == pid and proc.usedGpuMemory is not None:
                    total += int(proc.usedGpuMemory)
                    found = True
        return total if found else 0
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def read_ram() -> tuple[int, int]:
    """(total, available) host memory in bytes."""
    vm = psutil.virtual_memory()
    return int(vm.total), int(vm.available)


def system_memory() -> SystemMemory:
    total, available = read_ram()
    return SystemMemory(total, available, read_vram())


# --------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True)
class FitPlan:
    target: ModelMemory
    draft: ModelMemory | None
    memory: SystemMemory
    gpu_needed_bytes: int
    host_needed_bytes: int
    fits_gpu: bool | None  # None when there is no GPU: everything runs on the CPU
    fits_host: bool
    suggested_n_gpu_layers: int  # for the target; the requested value when it already fits
    suggested_draft_n_gpu_layers: int | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def fits(self) -> bool:
        return self.fits_host and self.fits_gpu is not False


def _gpu_for(info: GGUFInfo, n_ctx: int, layers: int, kv_bpe: float) -> int:
    return estimate_model_memory(
        info, n_ctx=n_ctx, n_gpu_layers=layers, kv_bytes_per_element=kv_bpe
    ).gpu_bytes


def _largest_fitting(info: GGUFInfo, n_ctx: int, budget: int, kv_bpe: float) -> int:
    """Largest layer count (0..n_layers+1) whose GPU share fits in `budget` (monotonic search)."""
    n_layers = info.n_layers or len(info.layer_bytes)
    lo, hi = 0, n_layers + 1
    if _gpu_for(info, n_ctx, hi, kv_bpe) <= budget:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _gpu_for(info, n_ctx, mid, kv_bpe) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_fit(
    target: GGUFInfo,
    draft: GGUFInfo | None = None,
    *,
    n_ctx: int,
    draft_n_ctx: int | None = None,
    n_gpu_layers: int = -1,
    draft_n_gpu_layers: int = -1,
    memory: SystemMemory | None = None,
    kv_bytes_per_element: float = F16_BYTES,
    headroom_bytes: int = DEFAULT_HEADROOM_BYTES,
    remote_free_bytes: int = 0,
) -> FitPlan:
    """Will target (+ draft) fit? Warnings in words, and GPU-layer counts that would fit.

    The draft is kept whole on the GPU when it can be (it runs γ times per round, so it is the
    latency-critical model); the target takes the layers that remain. `remote_free_bytes` is
    the free memory of the RPC workers that take the target's offloaded layers (as they report
    it); offloaded layers may use it besides local VRAM. With workers and no local GPU the
    draft stays on this machine's CPU.
    """
    memory = system_memory() if memory is None else memory
    draft_ctx = n_ctx if draft_n_ctx is None else draft_n_ctx
    warnings: list[str] = []

    if not memory.has_gpu and remote_free_bytes > 0:
        draft_n_gpu_layers = 0
    elif not memory.has_gpu:
        t_mem = estimate_model_memory(
            target, n_ctx=n_ctx, n_gpu_layers=0, kv_bytes_per_element=kv_bytes_per_element
        )
        d_mem = (
            estimate_model_memory(
                draft, n_ctx=draft_ctx, n_gpu_layers=0, kv_bytes_per_element=kv_bytes_per_element
            )
            if draft is not None
            else None
        )
        host = t_mem.total_bytes + (d_mem.total_bytes if d_mem else 0)
        fits_host = host <= memory.ram_available_bytes
        if not fits_host:
            warnings.append(
                f"needs about {format_bytes(host)} of RAM but "
                f"{format_bytes(memory.ram_available_bytes)} is available: expect heavy swapping; "
                "pick smaller files or a shorter context"
            )
        return FitPlan(
            t_mem, d_mem, memory, 0, host, None, fits_host, 0, 0 if draft else None, tuple(warnings)
        )

    vram_free = (memory.vram_free_bytes or 0) + remote_free_bytes
    budget = max(vram_free - headroom_bytes, 0)
    t_mem = estimate_model_memory(
        target, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, kv_bytes_per_element=kv_bytes_per_element
    )
    d_mem = (
        estimate_model_memory(
            draft,
            n_ctx=draft_ctx,
            n_gpu_layers=draft_n_gpu_layers,
            kv_bytes_per_element=kv_bytes_per_element,
        )
        if draft is not None
        else None
    )
    gpu = t_mem.gpu_bytes + (d_mem.gpu_bytes if d_mem else 0)
    host = t_mem.cpu_bytes + (d_mem.cpu_bytes if d_mem else 0)
    fits_gpu = gpu <= budget
    fits_host = host <= memory.ram_available_bytes

    suggested_target = t_mem.n_gpu_layers if n_gpu_layers >= 0 else n_gpu_layers
    suggested_draft: int | None = None
    if d_mem is not None:
        suggested_draft = d_mem.n_gpu_layers if draft_n_gpu_layers >= 0 else draft_n_gpu_layers
    if not fits_gpu:
        draft_gpu = d_mem.gpu_bytes if d_mem else 0
        if draft is not None and draft_gpu > budget:
            suggested_draft = _largest_fitting(draft, draft_ctx, budget, kv_bytes_per_element)
            draft_gpu = _gpu_for(draft, draft_ctx, suggested_draft, kv_bytes_per_element)
        suggested_target = _largest_fitting(
            target, n_ctx, max(budget - draft_gpu, 0), kv_bytes_per_element
        )
        what = "target and draft" if draft is not None else "the model"
        advice = f"use --n-gpu-layers {suggested_target}"
        if (
            draft is not None
            and suggested_draft is not None
            and suggested_draft != (d_mem.n_gpu_layers if d_mem else None)
        ):
            advice += f" and --draft-n-gpu-layers {suggested_draft}"
        where = "GPU and RPC worker" if remote_free_bytes > 0 else "GPU"
        warnings.append(
            f"{what} need about {format_bytes(gpu)} of {where} memory but "
            f"{format_bytes(vram_free)} is free (keeping {format_bytes(headroom_bytes)} spare): "
            f"{advice}, or a shorter context"
        )
    if not fits_host:
        warnings.append(
            f"needs about {format_bytes(host)} of RAM besides the GPU share but "
            f"{format_bytes(memory.ram_available_bytes)} is available"
        )
    return FitPlan(
        t_mem,
        d_mem,
        memory,
        gpu,
        host,
        fits_gpu,
        fits_host,
        suggested_target,
        suggested_draft,
        tuple(warnings),
    )
