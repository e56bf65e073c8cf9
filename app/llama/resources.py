"""Machine memory readouts for the metrics panel: process RAM always, VRAM when NVIDIA is there.

NVML (nvidia-ml-py) is probed once; any failure (no driver, no GPU, library missing) means
"no GPU" for the rest of the process rather than an error, because a CPU-only machine is a
normal place to run SpecChat. No Qt here: the window polls these from a timer.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import psutil

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GpuMemory:
    name: str
    used_bytes: int
    total_bytes: int


def process_ram_bytes() -> int:
    """Resident memory of this process (model weights mapped from disk count once touched)."""
    return int(psutil.Process(os.getpid()).memory_info().rss)


class GpuProbe:
    """VRAM of the first NVIDIA GPU, or None when there is none.

    `nvml` is injectable so tests can stand in for a GPU machine; by default the real pynvml
    module is imported lazily.
    """

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self._handle: Any = None
        self._name = ""
        self._state = "unprobed"  # then "ready" or "absent"; never goes back
        self._lock = threading.Lock()

    def _probe(self) -> None:
        try:
            if self._nvml is None:
                import pynvml  # noqa: PLC0415 - optional native library, loaded on first use

                self._nvml = pynvml
            self._nvml.nvmlInit()
            if self._nvml.nvmlDeviceGetCount() < 1:
                self._state = "absent"
                return
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(0)
            name = self._nvml.nvmlDeviceGetName(self._handle)
            self._name = name.decode() if isinstance(name, bytes) else str(name)
            self._state = "ready"
        except Exception as exc:
            log.debug("no NVIDIA GPU: %s", exc)
            self._state = "absent"

    def read(self) -> GpuMemory | None:
        with self._lock:
            if self._state == "unprobed":
                self._probe()
            if self._state != "ready":
                return None
            try:
                info = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
            except Exception as exc:
                log.debug("NVML read failed: %s", exc)
                return None
            return GpuMemory(self._name, int(info.used), int(info.total))

    def close(self) -> None:
        with self._lock:
            if self._state == "ready":
                try:
                    self._nvml.nvmlShutdown()
                except Exception as exc:
                    log.debug("NVML shutdown failed: %s", exc)
            self._state = "absent"


def format_bytes(n: float | None) -> str:
    """Human size in binary units, as the memory readout and the draft dropdown show it."""
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024.0 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit in ("B", "KiB") else f"{value:.1f} {unit}"
        value /= 1024.0
    raise AssertionError("unreachable")  # pragma: no cover
