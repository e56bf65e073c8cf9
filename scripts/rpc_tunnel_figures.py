"""What the key and TLS cost: a keyed `specchat worker` against one with --insecure-plain.

Starts both workers on 127.0.0.1 and, round after round in alternation (so a busy machine's
swings hit both alike), loads the demo F32 target on each (its 513 MiB of layer weights cross
the connection: the tunnel's bulk throughput), decodes greedily from two prompts (several
small request/reply exchanges per token), and times bare round trips of llama.cpp's smallest
request (DEVICE_COUNT) through the client's real tunnel or straight to the plain worker: the
latency the two extra forwarding hops add. Prints the median of each.

    python scripts/rpc_tunnel_figures.py [--rounds 3] [--tokens 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.engine.config import GenerationConfig  # noqa: E402
from app.engine.events import FinishEvent  # noqa: E402
from app.engine.isolated import IsolatedRuntime  # noqa: E402
from app.llama import rpc  # noqa: E402
from app.llama.config import ModelConfig  # noqa: E402
from app.llama.rpc_token import parse_token  # noqa: E402
from app.llama.rpc_tunnel import tunnel_to  # noqa: E402
from models.demo import ensure_demo_models  # noqa: E402
from tests.helpers.rpc_workers import CMD_DEVICE_COUNT, HELLO, frame, running_worker  # noqa: E402

PROMPTS = ("The three primary colours are", "def fibonacci(n):")


def _round(target: ModelConfig, endpoint: str, tokens: int) -> tuple[float, int, float]:
    """(load seconds, bytes placed on the worker, decoded tokens per second)."""
    runtime = IsolatedRuntime()
    try:
        start = time.perf_counter()
        facts = runtime.load_target(replace(target, rpc_servers=(endpoint,)))
        load_s = time.perf_counter() - start
        remote = sum(size for name, size in facts.placement if name.startswith("RPC"))
        generated, seconds = 0, 0.0
        for prompt in PROMPTS:
            ids = runtime.text_prompt(prompt)
            start = time.perf_counter()
            events = list(runtime.generate(ids, GenerationConfig(max_tokens=tokens)))
            seconds += time.perf_counter() - start
            last = events[-1]
            assert isinstance(last, FinishEvent)
            generated += last.result.stats.generated_tokens
    finally:
        runtime.close()
    return load_s, remote, generated / seconds


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the worker closed the connection")
        data += chunk
    return data


def _round_trip_us(dial: str, count: int) -> float:
    """Median microseconds of one DEVICE_COUNT request and its 12-byte reply."""
    with socket.create_connection(rpc.split_endpoint(dial)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(HELLO)
        _exactly(sock, 8 + 28)
        request, times = frame(CMD_DEVICE_COUNT), []
        for _ in range(count):
            start = time.perf_counter()
            sock.sendall(request)
            _exactly(sock, 12)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--round-trips", type=int, default=2000)
    args = parser.parse_args()
    demo = ensure_demo_models()
    target = ModelConfig(str(demo.f32), n_ctx=512, n_threads=args.threads)
    results: dict[str, list[tuple[float, int, float, float]]] = {"keyed (TLS)": [], "plain": []}
    with running_worker() as keyed, running_worker(plain=True) as plain:
        dials = {
            "keyed (TLS)": tunnel_to(keyed.endpoint, parse_token(keyed.key)),
            "plain": plain.endpoint,
        }
        for _ in range(args.rounds):
            for label, worker in (("keyed (TLS)", keyed), ("plain", plain)):
                load_s, remote, rate = _round(target, worker.endpoint, args.tokens)
                trip = _round_trip_us(dials[label], args.round_trips)
                results[label].append((load_s, remote, rate, trip))
                print(
                    f"  {label}: load {load_s:.2f} s, {rate:.2f} tok/s, {trip:.0f} µs", flush=True
                )
    print("| worker | load (median) | load throughput | tok/s (median) | small round trip |")
    print("|---|---|---|---|---|")
    medians = []
    for label, rows in results.items():
        load_s, rate, trip = (statistics.median(r[i] for r in rows) for i in (0, 2, 3))
        mib = rows[0][1] / 2**20
        medians.append((load_s, rate))
        print(
            f"| {label} | {load_s:.2f} s | {mib / load_s:.0f} MiB/s | {rate:.2f} | {trip:.0f} µs |"
        )
    (keyed_load, keyed_rate), (plain_load, plain_rate) = medians
    print(
        f"keyed / plain: {keyed_rate / plain_rate:.2f}x tokens/s, "
        f"{plain_load / keyed_load:.2f}x load throughput"
    )


if __name__ == "__main__":
    main()
