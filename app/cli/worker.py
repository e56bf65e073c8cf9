"""`specchat worker`: serve this machine's CPU (or a named GPU) to other SpecChats over RPC.

The worker is llama.cpp's own RPC server (ggml-rpc); a client started with `--rpc HOST:PORT`
places model layers on it. It serves one client at a time and runs until stopped (Ctrl-C).
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path

from app.errors import InvalidSettingError
from app.llama import rpc
from app.llama.rpc_keepalive import start_keepalive_thread


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="serve this machine's CPU or GPU to another SpecChat over RPC",
        description="Serve this machine's CPU (or a GPU) to another SpecChat, which places "
        "model layers here with --rpc HOST:PORT. Both sides must run the same SpecChat and "
        f"llama-cpp-python version. Warning: {rpc.SECURITY_WARNING}",
    )
    worker.add_argument(
        "--host",
        default=rpc.LOOPBACK,
        help=f"address to listen on (default {rpc.LOOPBACK}, this machine only; a LAN "
        "address such as 192.168.1.20 lets other machines connect)",
    )
    worker.add_argument("--port", type=int, default=rpc.DEFAULT_PORT, help="TCP port")
    worker.add_argument("--threads", type=int, default=None, help="CPU threads for the work")
    worker.add_argument(
        "--device",
        default=None,
        help="device to serve, e.g. CPU or CUDA0 (default: the first GPU, else the CPU)",
    )
    worker.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep received weights in DIR, so a client reloading the same model sends "
        "hashes instead of large tensors",
    )
    worker.set_defaults(handler=run_worker)


def _check_port(host: str, port: int) -> None:
    # llama.cpp only prints "Failed to create server socket" and returns; say why, up front.
    if not 0 < port < 65536:
        raise InvalidSettingError(f"--port must be 1..65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise InvalidSettingError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None


def run_worker(args: argparse.Namespace) -> int:
    from app.llama.threads import default_thread_count  # noqa: PLC0415 - loads llama.cpp

    rpc.require_rpc()
    if args.threads is not None and args.threads < 1:
        raise InvalidSettingError(f"--threads must be at least 1, got {args.threads}")
    _check_port(args.host, args.port)
    cache: Path | None = args.cache
    if cache is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidSettingError(f"--cache: cannot create {cache}: {exc.strerror}") from None
    device = args.device or rpc.default_worker_device()
    rpc.find_device(device)
    threads = args.threads or default_thread_count()
    if not rpc.is_loopback(args.host):
        print(f"warning: listening on {args.host}: {rpc.SECURITY_WARNING}", file=sys.stderr)
    print(
        f"specchat worker: serving {device} on {args.host}:{args.port} with {threads} threads "
        "(Ctrl-C stops it)",
        file=sys.stderr,
        flush=True,
    )
    # The server blocks inside llama.cpp, where Python's Ctrl-C handler never runs: let the
    # signals end the process the ordinary way.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # The worker waits on its one client without a timeout; a client machine that vanished
    # would block it for good. Keepalive drops that connection so the next client gets in.
    start_keepalive_thread()
    rpc.start_server(f"{args.host}:{args.port}", [device], threads, str(cache) if cache else None)
    raise InvalidSettingError(f"the worker could not serve on {args.host}:{args.port}")
