"""Memory readouts: process RAM, and VRAM through NVML when there is an NVIDIA GPU."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

import psutil

from app.llama.resources import GpuMemory, GpuProbe, format_bytes, process_ram_bytes


def test_process_ram_is_this_process_resident_size() -> None:
    ram = process_ram_bytes()
    assert 10 * 2**20 < ram < psutil.virtual_memory().total
    # A fresh anonymous mapping, not a heap allocation: malloc may hand back pages freed by
    # earlier tests that are still resident, and then the reading would rightly not grow.
    ballast = mmap.mmap(-1, 64 * 2**20)
    try:
        for offset in range(0, len(ballast), mmap.PAGESIZE):
            ballast[offset] = 1  # touch every page so it becomes resident
        assert process_ram_bytes() > ram + 32 * 2**20
    finally:
        ballast.close()


@dataclass
class _MemInfo:
    used: int
    total: int


class FakeNvml:
    """Stands in for pynvml on a machine with one NVIDIA GPU."""

    def __init__(self, *, count: int = 1, fail_init: bool = False) -> None:
        self.count = count
        self.fail_init = fail_init
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return ("gpu", index)

    def nvmlDeviceGetName(self, _handle: Any) -> bytes:
        return b"NVIDIA Test 24GB"

    def nvmlDeviceGetMemoryInfo(self, _handle: Any) -> _MemInfo:
        return _MemInfo(used=3 * 2**30, total=24 * 2**30)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1


def test_gpu_probe_reads_vram_when_a_gpu_is_present() -> None:
    nvml = FakeNvml()
    probe = GpuProbe(nvml)
    assert probe.read() == GpuMemory("NVIDIA Test 24GB", 3 * 2**30, 24 * 2**30)
    probe.close()
    assert nvml.shutdowns == 1
    assert probe.read() is None


def test_gpu_probe_says_none_without_a_driver_or_a_device() -> None:
    assert GpuProbe(FakeNvml(fail_init=True)).read() is None
    assert GpuProbe(FakeNvml(count=0)).read() is None


def test_real_probe_answers_without_raising() -> None:
    # Whatever this machine has: a GpuMemory with sane numbers, or None.
    reading = GpuProbe().read()
    assert reading is None or 0 <= reading.used_bytes <= reading.total_bytes


def test_format_bytes() -> None:
    assert format_bytes(None) == "—"
    assert format_bytes(512) == "512 B"
    assert format_bytes(2048) == "2 KiB"
    assert format_bytes(93 * 2**20 + 2**19) == "93.5 MiB"
    assert format_bytes(3 * 2**30) == "3.0 GiB"
    assert format_bytes(5000 * 2**30) == "5000.0 GiB"
