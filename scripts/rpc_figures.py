"""Measure decoding through llama.cpp RPC workers on this machine: tokens/s and bytes per token.

Starts two `specchat worker` processes on 127.0.0.1 and runs the demo F32 target locally, on
one worker and split over two, plain and speculative (the Q4_1 demo draft always local).
Bytes are what the workers' TCP connections carried both ways while generating (the kernel's
per-connection counters, read with `ss -ti`, Linux), divided by the tokens generated: the
network traffic a real second PC would see, TLS included (the workers are keyed). Figures on a
busy machine are noisy; run it on an idle one.

    python scripts/rpc_figures.py [--tokens 64] [--threads 1] [--n-gpu-layers -1]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.engine.config import GenerationConfig  # noqa: E402
from app.engine.events import FinishEvent  # noqa: E402
from app.engine.gamma import OFF, fixed  # noqa: E402
from app.engine.isolated import IsolatedRuntime  # noqa: E402
from app.llama import rpc_keys  # noqa: E402
from app.llama.config import ModelConfig  # noqa: E402
from app.llama.rpc_identity import load_identity  # noqa: E402
from models.compat import check_draft_file  # noqa: E402
from models.demo import ensure_demo_models  # noqa: E402

PROMPTS = ("The three primary colours are", "def fibonacci(n):")


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_worker(threads: int) -> tuple[str, subprocess.Popen[bytes]]:
    port = _port()
    # A keyed worker, as by default: its key made first in a data folder of its own.
    data = Path(tempfile.mkdtemp(prefix="specchat-worker-"))
    rpc_keys.remember(f"127.0.0.1:{port}", str(load_identity(data / "worker").token))
    cmd = [sys.executable, "-m", "app.cli", "worker", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--threads", str(threads)],
        cwd=REPO,
        env=dict(os.environ, SPECCHAT_DATA_DIR=str(data)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), 1):
                return f"127.0.0.1:{port}", proc
        except OSError:
            time.sleep(0.2)
    raise SystemExit("worker did not start")


def _traffic(endpoints: tuple[str, ...]) -> int:
    """Bytes sent plus received on the established connections to these workers' ports."""
    total = 0
    for endpoint in endpoints:
        port = endpoint.rsplit(":", 1)[1]
        out = subprocess.run(
            ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for name in ("bytes_sent", "bytes_received"):
            total += sum(int(n) for n in re.findall(rf"\b{name}:(\d+)", out))
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--n-gpu-layers", type=int, default=-1, help="target layers on the workers (-1 = all)"
    )
    args = parser.parse_args()
    demo = ensure_demo_models()
    target = ModelConfig(
        str(demo.f32), n_ctx=512, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers
    )
    draft = ModelConfig(str(demo.q4_1), n_ctx=512, n_threads=args.threads)
    workers = [_start_worker(args.threads) for _ in range(2)]
    try:
        print("| target on | mode | tok/s | bytes/token over the network |")
        print("|---|---|---|---|")
        for label, endpoints in (
            ("this process", ()),
            ("1 worker", (workers[0][0],)),
            ("2 workers", (workers[0][0], workers[1][0])),
        ):
            for mode in ("plain", "speculative"):
                runtime = IsolatedRuntime(vet_draft=check_draft_file)
                try:
                    runtime.load_target(replace(target, rpc_servers=endpoints))
                    if mode == "speculative":
                        runtime.load_draft(draft)
                    gamma = fixed(4) if mode == "speculative" else OFF
                    config = GenerationConfig(max_tokens=args.tokens, gamma=gamma)
                    tokens, seconds, traffic = 0, 0.0, 0
                    for prompt in PROMPTS:
                        ids = runtime.text_prompt(prompt)
                        before = _traffic(endpoints)
                        start = time.perf_counter()
                        events = list(runtime.generate(ids, config))
                        seconds += time.perf_counter() - start
                        traffic += _traffic(endpoints) - before
                        last = events[-1]
                        assert isinstance(last, FinishEvent)
                        tokens += last.result.stats.generated_tokens
                finally:
                    runtime.close()
                per_token = f"{traffic / tokens / 1024:.0f} KiB" if endpoints else "—"
                print(f"| {label} | {mode} | {tokens / seconds:.1f} | {per_token} |", flush=True)
    finally:
        for _, proc in workers:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
