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
from typing import Any

from app.engine.config import GenerationConfig, ModelConfig
from app.engine.events import FinishEvent
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
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


def _generate(runtime: Runtime, ids: list[int], config: GenerationConfig, spec: bool) -> Any:
    result: GenerationResult | None = None
    for event in runtime.generate(ids, config, speculative=spec):
        if isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    return result


def run_pair(
    target: str, draft: str, *, gammas: list[int], max_tokens: int, n_ctx: int, probe: GpuProbe
) -> dict[str, Any]:
    before = vram_reading(probe)
    lines = LoadLines()
    llama_log = logging.getLogger("app.llama.model")  # where llama.cpp's own log is routed
    llama_log.addHandler(lines)
    llama_log.setLevel(logging.DEBUG)
    runtime = Runtime(vet_draft=check_draft_file)
    started = time.perf_counter()
    try:
        runtime.load_target(ModelConfig(target, n_ctx=n_ctx, n_gpu_layers=-1))
        runtime.load_draft(ModelConfig(draft, n_ctx=n_ctx, n_gpu_layers=-1))
        load_s = time.perf_counter() - started
        loaded = vram_reading(probe)
        llama_log.removeHandler(lines)
        memory = runtime.memory()
        runs: list[dict[str, Any]] = []
        for p, text in enumerate(PROMPTS):
            ids = runtime.text_prompt(text)
            for exact in (False, True):
                base = GenerationConfig(max_tokens=max_tokens, exact=exact)
                plain = _generate(runtime, ids, base, spec=False)
                runs.append(_row(p, exact, None, plain, plain))
                for gamma in gammas:
                    config = GenerationConfig(max_tokens=max_tokens, gamma=gamma, exact=exact)
                    runs.append(_row(p, exact, gamma, _generate(runtime, ids, config, True), plain))
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
    for draft in args.draft:
        out["pairs"].append(
            run_pair(
                args.target,
                draft,
                gammas=gammas,
                max_tokens=args.max_tokens,
                n_ctx=args.n_ctx,
                probe=probe,
            )
        )
    probe.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
