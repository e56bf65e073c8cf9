"""What the GPU check runs after the build, in which order, and what each step is expected to
cost; the check skips a step whose estimate does not fit in the time left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scripts.gpucheck.models import file_names

# Per-step estimates in seconds, measured on a CPU at small sizes and scaled (docs/gpu-check.md).
WRITE_BYTES_PER_S = 400e6  # writing random F16 through the gguf writer
QUANTIZE_BYTES_PER_S = 500e6  # llama_model_quantize reading F16
BUILD_ESTIMATE_S = 330
TOOLS_ESTIMATE_S = 90


# What each size costs: bytes of F16 written and quantized (the small draft of "8b" is the 1B
# target, written by "1b" when both run), and the seconds its identity and bench steps take on
# the GPU, estimated from the CPU runs scaled by memory bandwidth with a wide margin
# (docs/gpu-check.md, "Sizes and time").
MODEL_SETS: dict[str, dict[str, Any]] = {
    "tiny": {"write_bytes": 3e6, "quantize_bytes": 2e6, "identity_s": 90, "bench_s": 60,
             "note": "tiny F16 target, its Q8_0 copy, a tinier draft"},
    "1b": {"write_bytes": 3.45e9, "quantize_bytes": 3.0e9, "identity_s": 35, "bench_s": 45,
           "note": "1B-shaped F16 target, its Q8_0 copy, a 200M-shaped draft"},
    "8b": {"write_bytes": 16.1e9, "quantize_bytes": 16.1e9, "identity_s": 70, "bench_s": 75,
           "note": "8B-shaped F16 target, its Q8_0 copy, the 1B-shaped draft"},
}  # fmt: skip


def write_estimate_s(size: str, models_dir: Path) -> float:
    """Seconds to write and quantize a size's models; a few when they are already there."""
    if all((models_dir / name).is_file() for name in file_names(size)):
        return 5.0
    cost = MODEL_SETS[size]
    write_s = float(cost["write_bytes"]) / WRITE_BYTES_PER_S
    return 5.0 + write_s + float(cost["quantize_bytes"]) / QUANTIZE_BYTES_PER_S


def plan(sizes: str) -> list[tuple[str, str]]:
    """The steps after the build, most valuable first, so a short budget drops the least.

    Exactness on CUDA kernels is cheapest to show at the first size; speed matters most at the
    largest; then the rest; llama.cpp's own tools last (optional)."""
    names = [s.strip() for s in sizes.split(",") if s.strip()]
    first, last = names[0], names[-1]
    steps = [("write", first), ("identity", first)]
    for name in names[1:]:
        steps.append(("write", name))
    steps += [("bench", last), ("identity", last)] if last != first else [("bench", first)]
    for name in names[1:-1]:
        steps += [("identity", name), ("bench", name)]
    if last != first:
        steps.append(("bench", first))
    steps.append(("tools", last))
    return steps
