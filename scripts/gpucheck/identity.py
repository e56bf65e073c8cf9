"""One model pair on the device: offload, VRAM readout, greedy identity and acceptance.

Run as its own process by the check (`python -m scripts.gpucheck.identity ...`), so a crash in
a CUDA kernel ends this step and not the whole check. Prints one JSON object on stdout.

For each draft: the target and the draft are loaded with every layer offloaded; the VRAM that
SpecChat's readout reports (NVML) is compared with `nvidia-smi` at the same moment and with the
weights and KV cache llama.cpp says it holds; then every prompt is decoded greedily plain and
speculatively at each γ, in default and exact mode, and the token ids are compared.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent
from app.engine.exact_check import EXACT_NOT_GUARANTEED
from app.engine.gamma import OFF, fixed
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.llama.backend import LLAMA_LOG_NAME
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.llama.resources import GpuProbe
from models.compat import check_draft_file

PROMPTS = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "def fibonacci(n):\n    ",
)
MIB = 1024 * 1024


class LoadLines(logging.Handler):
    """Collects llama.cpp's lines about where weights and caches went (it logs each buffer's
    device), the direct evidence that layers were offloaded."""

    KEYS = ("offload", "buffer size", "CUDA", "using device")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if any(key in message for key in self.KEYS):
            self.lines.append(message.split(": ", 1)[-1][:200])


def nvidia_smi_used_bytes() -> int | None:
    """GPU 0's used memory as nvidia-smi reports it, or None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    try:
        return int(out.stdout.strip().splitlines()[0]) * MIB
    except (ValueError, IndexError):
        return None


def vram_reading(probe: GpuProbe) -> dict[str, Any]:
    mem = probe.read()
    return {
        "nvml_used_bytes": mem.used_bytes if mem else None,
        "nvml_total_bytes": mem.total_bytes if mem else None,
        "gpu_name": mem.name if mem else None,
        "nvidia_smi_used_bytes": nvidia_smi_used_bytes(),
    }


def _generate(runtime: Runtime, ids: list[int], config: GenerationConfig) -> Any:
    result: GenerationResult | None = None
    for event in runtime.generate(ids, config):
        if isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    return result


PROBE_ROWS = 34
PROBE_PASSES = (3, 5, 9, 17)  # rows per pass; CUDA switches kernels by batch size among these


def pass_size_probe(model: LlamaModel, prompt: list[int]) -> dict[str, list[dict[str, Any]]]:
    """Logits of the same positions computed by passes of different sizes, compared.

    The root of exact mode's guarantee: in exact mode every step is a 2-row pass, and
    verification passes of any size must give bit-equal logits for the same positions. In
    default mode the reference is the 1-row step, which is expected to differ on some backends.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for mode, uniform in (("exact", True), ("default", False)):
        model.uniform_batches = uniform
        try:
            out[mode] = _compare_pass_sizes(model, prompt)
        finally:
            model.uniform_batches = False
            model.reset()
    return out


def _compare_pass_sizes(model: LlamaModel, prompt: list[int]) -> list[dict[str, Any]]:
    model.reset()
    model.feed(prompt[:-1], 0)
    sequence = list(prompt)
    steps: list[np.ndarray[Any, Any]] = []
    for _ in range(PROBE_ROWS):
        row = model.feed(sequence, 1)[0]
        steps.append(row)
        sequence.append(int(np.argmax(row)))
    rows_out: list[dict[str, Any]] = []
    for per_pass in PROBE_PASSES:
        model.reset()
        model.feed(prompt[:-1], 0)
        batched: list[np.ndarray[Any, Any]] = []
        end = len(prompt)
        while len(batched) < len(steps):
            rows = min(per_pass, len(steps) - len(batched))  # the last pass may be shorter
            end += rows
            batched.extend(model.feed(sequence[: end - 1], rows))
        pairs = list(zip(steps, batched, strict=False))
        rows_out.append(
            {
                "rows_per_pass": per_pass,
                "positions": len(pairs),
                "bit_equal": sum(bool(np.array_equal(a, b)) for a, b in pairs),
                "same_argmax": sum(int(np.argmax(a)) == int(np.argmax(b)) for a, b in pairs),
                "max_abs_diff": max(float(np.max(np.abs(a - b))) for a, b in pairs),
            }
        )
    return rows_out


def run_pair(
    target: str,
    draft: str,
    *,
    gammas: list[int],
    max_tokens: int,
    n_ctx: int,
    probe: GpuProbe,
    with_probe: bool = False,
) -> dict[str, Any]:
    before = vram_reading(probe)
    lines = LoadLines()
    llama_log = logging.getLogger(LLAMA_LOG_NAME)
    llama_log.addHandler(lines)
    llama_log.setLevel(logging.DEBUG)
    # The pair's own identity and acceptance: the draft model alone, not the hybrid with the
    # suffix index, whose rounds would mix in drafts the pair never made.
    runtime = Runtime(vet_draft=check_draft_file, suffix_joins_models=False)
    started = time.perf_counter()
    try:
        runtime.load_target(ModelConfig(target, n_ctx=n_ctx, n_gpu_layers=-1))
        runtime.load_draft(ModelConfig(draft, n_ctx=n_ctx, n_gpu_layers=-1))
        load_s = time.perf_counter() - started
        loaded = vram_reading(probe)
        llama_log.removeHandler(lines)
        memory = runtime.memory()
        pass_sizes = None
        if with_probe:
            assert runtime.target is not None
            pass_sizes = pass_size_probe(runtime.target, runtime.text_prompt(PROMPTS[0]))
        runs: list[dict[str, Any]] = []
        for p, text in enumerate(PROMPTS):
            ids = runtime.text_prompt(text)
            for exact in (False, True):
                base = GenerationConfig(max_tokens=max_tokens, gamma=OFF, exact=exact)
                plain = _generate(runtime, ids, base)
                runs.append(_row(p, exact, None, plain, plain))
                for gamma in gammas:
                    config = replace(base, gamma=fixed(gamma))
                    runs.append(_row(p, exact, gamma, _generate(runtime, ids, config), plain))
    finally:
        llama_log.removeHandler(lines)
        runtime.close()
    return {
        "target": target,
        "draft": draft,
        "load_s": load_s,
        "load_log": lines.lines[:40],
        "vram_before": before,
        "vram_loaded": loaded,
        "pass_sizes": pass_sizes,
        "model_memory": {
            "target_weights": memory.target_weights,
            "target_kv": memory.target_kv,
            "draft_weights": memory.draft_weights,
            "draft_kv": memory.draft_kv,
            "total": memory.total,
        },
        "runs": runs,
    }


def _row(prompt: int, exact: bool, gamma: int | None, result: Any, plain: Any) -> dict[str, Any]:
    stats = result.stats
    return {
        "prompt": prompt,
        "exact": exact,
        "gamma": gamma,
        "tokens": stats.generated_tokens,
        "tokens_per_second": stats.tokens_per_second,
        "acceptance_rate": stats.acceptance_rate,
        "tokens_per_round": stats.tokens_per_round,
        "identical_to_plain": list(result.token_ids) == list(plain.token_ids),
        "first_mismatch": _first_mismatch(list(result.token_ids), list(plain.token_ids)),
        # Whether the engine's own pass-size check (app/engine/exact_check.py) warned this reply.
        "exact_check_warned": EXACT_NOT_GUARANTEED in result.notices,
    }


def _first_mismatch(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucheck-identity")
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", action="append", required=True)
    parser.add_argument("--gammas", default="1,4,8,16")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--n-ctx", type=int, default=1024)
    args = parser.parse_args(argv)
    import llama_cpp  # noqa: PLC0415 - the build under test, loaded once the flags parsed

    probe = GpuProbe()
    out: dict[str, Any] = {
        "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
        "llama_cpp_file": llama_cpp.__file__,
        "pairs": [],
    }
    gammas = [int(g) for g in args.gammas.split(",")]
    for i, draft in enumerate(args.draft):
        out["pairs"].append(
            run_pair(
                args.target,
                draft,
                gammas=gammas,
                max_tokens=args.max_tokens,
                n_ctx=args.n_ctx,
                probe=probe,
                with_probe=i == 0,
            )
        )
    probe.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
