"""How many CPU threads llama.cpp uses: one per free physical core, re-checked while it runs.

This build of llama.cpp runs its CPU graph with OpenMP. Its threads meet at a barrier after every
operation, hundreds of times per token. When another process competes for the cores (a browser,
a build, a second model), one of them is regularly descheduled and every other one waits for it
at the next barrier: two threads beside one CPU-bound process on two cores ran at 30 % of their
quiet speed, where one thread kept 70 %. So, unless the user fixed a thread count, the models of
a process share one `CoreGovernor` that watches how much CPU other processes take and gives
llama.cpp only the cores they leave free. docs/threads.md has the measurements
(scripts/contention-bench) behind every choice here.

OpenMP's wait policy is left at its own default (spin briefly, then sleep). Forcing
OMP_WAIT_POLICY=ACTIVE was no faster and kept one core spinning at 100 % for as long as the window
sat idle after a reply; PASSIVE cost 40-50 % of quiet speed. A user's own setting is honoured, as
OpenMP reads it when llama.cpp loads.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable

import psutil

log = logging.getLogger(__name__)

# Other processes must keep at least this much of a core busy, on average, before it counts as
# taken. Desktop background work (an idle browser, the window's own drawing in a helper) stays
# below it; a busy tab, a build or a second model does not.
TAKEN_AT = 0.4
# How often the CPU counters are read: often enough to react within a few tokens, rarely enough
# that /proc reads never show up in a token's time, and long enough for the kernel's 10 ms
# accounting ticks to resolve a fraction of a core.
SAMPLE_EVERY_S = 0.25
# A core is taken away only once other programs have held it this long: halving llama.cpp's
# threads for a blip (a cron job, a tab repainting, a shell starting a command) costs far more
# than the blip itself, and on a quiet machine the default must run as fast as a fixed
# `--threads`. A core comes back at the first reading that shows it free.
HOLD_S = 0.75

CpuSeconds = Callable[[], tuple[float, float]]
"""Returns (CPU seconds every process has used, CPU seconds this process has used)."""


def physical_cores() -> int:
    # Hyper-threads slow llama.cpp's matrix kernels down rather than up: count cores.
    physical = psutil.cpu_count(logical=False)
    return max(1, physical or os.cpu_count() or 1)


def default_thread_count() -> int:
    """Threads per model when the user sets none and nothing else runs."""
    return physical_cores()


def read_cpu_seconds() -> tuple[float, float]:
    system = psutil.cpu_times()
    # Guest time is already inside user time on Linux; steal is a hypervisor giving our virtual
    # CPUs to someone else, which descheduled threads the same way a local process does.
    busy = system.user + system.system
    for extra in ("nice", "irq", "softirq", "steal"):
        busy += getattr(system, extra, 0.0)
    own = psutil.Process().cpu_times()
    return busy, own.user + own.system


class CoreGovernor:
    """How many cores other processes leave free, measured between llama.cpp's decodes.

    Other processes' use is the system-wide CPU time minus this process's own, over the time
    since the last reading. llama.cpp's threads spinning at a barrier are this process's time, so
    they never count against it; the competitor's share shows even while they crowd it out.
    """

    def __init__(
        self,
        cores: int,
        *,
        read: CpuSeconds = read_cpu_seconds,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cores = max(1, cores)
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._free = self.cores
        self._last: tuple[float, float, float] | None = None  # (time, all busy, own busy)
        # Since when readings have shown fewer free cores than llama.cpp runs, and the most
        # cores any of them left free: the count drops to that once the shortage has held.
        self._short_since: float | None = None
        self._short_free = self.cores

    def free_cores(self) -> int:
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last[0] < SAMPLE_EVERY_S:
                return self._free
            busy, own = self._read()
            if self._last is not None:
                then, busy_then, own_then = self._last
                others = max(0.0, (busy - busy_then) - (own - own_then)) / (now - then)
                taken = math.floor(others + 1.0 - TAKEN_AT)
                free = self._held(max(1, self.cores - taken), since=then, now=now)
                if free != self._free:
                    log.info(
                        "other programs use %.1f CPU cores: llama.cpp now runs %d of %d threads",
                        others,
                        free,
                        self.cores,
                    )
                self._free = free
            self._last = (now, busy, own)
            return self._free

    def _held(self, free: int, *, since: float, now: float) -> int:
        """The count to run now, given that the last reading, from `since` to `now`, left
        `free` cores free."""
        if free >= self._free:
            self._short_since = None
            return free
        if self._short_since is None:
            self._short_since = since
            self._short_free = free
        else:
            self._short_free = max(self._short_free, free)
        if now - self._short_since < HOLD_S:
            return self._free
        self._short_since = None
        return self._short_free


_shared: CoreGovernor | None = None
_shared_lock = threading.Lock()


def shared_governor() -> CoreGovernor:
    """The one governor of this process: all its models compete for the same cores."""
    global _shared  # noqa: PLW0603 - one per process by design
    with _shared_lock:
        if _shared is None:
            _shared = CoreGovernor(default_thread_count())
        return _shared
