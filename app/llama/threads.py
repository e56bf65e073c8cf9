"""How many CPU threads llama.cpp uses, and whether they spin while they wait for each other.

This build of llama.cpp runs its CPU graph with OpenMP. Its threads meet at a barrier after every
operation, hundreds of times per token; by default OpenMP spins there for a while before
sleeping. On a quiet machine that saves a few microseconds per barrier. When another process
competes for the cores (a browser, a build, a second model), a descheduled thread keeps all the
others spinning on cores the competitor needs, and speed collapses. docs/threads.md has the
measurements (scripts/contention-bench) behind the defaults chosen here.

OpenMP reads its environment once, when the library loads, so `configure_openmp()` must run
before llama_cpp is imported; a variable the user set already is left alone.
"""

from __future__ import annotations

import os

# Waiting threads spin (OpenMP's own default, made explicit): on a quiet machine sleeping at
# every barrier cost 40-50 % of plain decoding's speed and more of speculation's, far more than
# the 5 % a quiet machine may lose for the sake of a busy one (docs/threads.md). A user who
# shares the cores with other work can set OMP_WAIT_POLICY=PASSIVE, which is then kept.
SPIN_ENV: dict[str, str] = {"OMP_WAIT_POLICY": "ACTIVE"}


def configure_openmp() -> None:
    for key, value in SPIN_ENV.items():
        os.environ.setdefault(key, value)


def physical_cores() -> int:
    # Hyper-threads slow llama.cpp's matrix kernels down rather than up: count cores.
    try:
        import psutil  # noqa: PLC0415

        physical = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a dependency
        physical = None
    return max(1, physical or os.cpu_count() or 1)


def default_thread_count() -> int:
    """Threads per model when the user sets none."""
    return physical_cores()
