"""`specchat worker`: serve this machine's CPU (or a named GPU) to other SpecChats over RPC.

The work is done by llama.cpp's own RPC server (ggml-rpc) in a child process on loopback, which
the worker restarts whenever a request makes it abort. The worker's port is a TLS front that
admits only clients proving its key (app/llama/rpc_front.py); a client started with
`--rpc KEY@HOST:PORT` places model layers here. `--insecure-plain` puts llama.cpp's server on
the port itself instead, for llama.cpp's own clients. One client at a time; runs until stopped.
"""

from __future__ import annotations

import argparse
import os
import socket
import stat
import sys
from pathlib import Path

from app.cli.args import check_utf8, user_file
from app.cli.signals import Interrupted
from app.errors import InvalidSettingError
from app.llama import rpc
from app.llama.config import MAX_THREADS
from app.llama.rpc_identity import WORKER_KEY_ENV, WorkerIdentity, load_identity, worker_folder
from app.llama.rpc_server_process import ServerProcess, ServerSettings, free_loopback_port
from app.llama.rpc_token import MIN_PASSPHRASE_CHARS, readable_fingerprint, secret_from_passphrase
from app.paths import make_private_dir


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="serve this machine's CPU or GPU to another SpecChat over RPC",
        description="Serve this machine's CPU (or a GPU) to another SpecChat, which places "
        "model layers here with --rpc KEY@HOST:PORT. Connections are encrypted (TLS) and only "
        "clients with the worker's key get in; the key is made at the first start and printed "
        "then. Both sides must run the same SpecChat and llama-cpp-python version.",
    )
    worker.add_argument(
        "--host",
        default=rpc.LOOPBACK,
        help=f"address to listen on (default {rpc.LOOPBACK}, this machine only; a LAN "
        "address such as 192.168.1.20 lets other machines connect)",
    )
    worker.add_argument("--port", type=int, default=rpc.DEFAULT_PORT, help="TCP port")
    worker.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for the work (default: every physical core, fixed)",
    )
    worker.add_argument(
        "--device",
        default=None,
        help="device to serve, e.g. CPU or CUDA0 (default: the first GPU, else the CPU)",
    )
    worker.add_argument(
        "--cache",
        type=user_file,
        default=None,
        metavar="DIR",
        help="keep received weights in DIR, so a client reloading the same model sends hashes "
        "instead of large tensors (a new DIR is made 0700; one others may write to is refused)",
    )
    worker.add_argument(
        "--key",
        default=None,
        metavar="PASSPHRASE",
        help=f"use this passphrase (at least {MIN_PASSPHRASE_CHARS} characters) instead of the "
        f"stored key; {WORKER_KEY_ENV} does the same without showing it to other users",
    )
    worker.add_argument(
        "--show-key",
        action="store_true",
        help="print the key clients need (KEY in --rpc KEY@HOST:PORT) and exit",
    )
    worker.add_argument(
        "--insecure-plain",
        action="store_true",
        help="serve llama.cpp's plain protocol with no key and no encryption, for llama.cpp's "
        "own clients (clients of this SpecChat use --rpc plain@HOST:PORT). Unsafe: "
        f"{rpc.SECURITY_WARNING}",
    )
    worker.set_defaults(handler=run_worker, check=check_worker_args)


def check_worker_args(args: argparse.Namespace) -> None:
    """The flags' values, before anything starts: exit status 2, like every usage error."""
    if not 0 < args.port < 65536:
        raise InvalidSettingError(f"--port must be 1..65535, got {args.port}")
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise InvalidSettingError(f"--threads must be in 1..{MAX_THREADS}, got {args.threads}")
    if args.insecure_plain:
        # A plain worker has no key: a key given anyway would read as protection it lacks.
        for flag, given in (("--key", args.key is not None), ("--show-key", args.show_key)):
            if given:
                raise InvalidSettingError(f"{flag} does not go with --insecure-plain (no key)")
        if ":" in args.host:  # it failed after start-up with "cannot listen on ::1:50052"
            raise InvalidSettingError(
                f"--host {args.host}: llama.cpp's plain RPC server listens on IPv4 addresses "
                "only; without --insecure-plain the worker listens on IPv6 too"
            )
    if args.key is not None:
        check_utf8("--key", args.key)
        secret_from_passphrase(args.key)  # too short is refused here, in its own words


def _bind(host: str, port: int) -> socket.socket:
    # llama.cpp only prints "Failed to create server socket" and returns; say why, up front.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidSettingError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return sock


def _say(line: str) -> None:
    print(f"specchat worker: {line}", file=sys.stderr, flush=True)


def client_address(host: str) -> str:
    """How a client names a worker listening on `host`, in the line it is told to use."""
    if host in ("0.0.0.0", "::"):  # every address: the client knows which one reaches it
        return "THIS-MACHINE"
    return f"[{host}]" if ":" in host else host


def _print_key(identity: WorkerIdentity, host: str, port: int) -> None:
    fingerprint = readable_fingerprint(identity.fingerprint)
    # A passphrase makes a key of its own: --show-key alone would print the stored one.
    show_key = (
        f"`specchat worker --show-key` with the same --key or {WORKER_KEY_ENV}"
        if identity.from_passphrase
        else "`specchat worker --show-key`"
    )
    if identity.key_is_new:
        shown = client_address(host)
        print(
            f"specchat worker: key for clients, shown this once ({show_key} prints it again): "
            f"{identity.token}\n"
            f"specchat worker: clients connect with --rpc {identity.token}@{shown}:{port}",
            file=sys.stderr,
            flush=True,
        )
    else:
        _say(f"clients need this worker's key: {show_key} prints it")
    _say(f"certificate fingerprint {fingerprint}")


def _weights_cache(cache: Path) -> None:
    """Make the cache folder, private, or check the one named: llama.cpp loads a cached tensor
    by its name, unchecked, so whoever may write there changes the weights every client
    computes with. An existing folder is not made private behind its owner's back (`--cache ~`
    would lock the home folder): one others may write to is refused instead."""
    try:
        if not cache.exists():
            make_private_dir(cache)
            return
        info = cache.stat()
    except OSError as exc:
        raise InvalidSettingError(f"--cache: cannot use {cache}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidSettingError(f"--cache: {cache} is not a folder")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise InvalidSettingError(
            f"--cache: {cache} belongs to another user; name a folder of yours"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InvalidSettingError(
            f"--cache: others may write to {cache}, and so change the weights clients compute "
            "with; name a folder only you can write to"
        )


def run_worker(args: argparse.Namespace) -> int:
    if args.show_key:
        print(load_identity(passphrase=args.key).token)
        return 0
    from app.llama.threads import default_thread_count  # noqa: PLC0415 - loads llama.cpp

    rpc.require_rpc()
    cache: Path | None = args.cache
    if cache is not None:
        _weights_cache(cache)
    device = args.device or rpc.default_worker_device()
    rpc.find_device(device)
    threads = args.threads or default_thread_count()
    # Claimed now, so a taken port fails before llama.cpp's server starts; listening begins
    # once that server is up, so a client that gets in is served at once.
    identity = None if args.insecure_plain else load_identity(passphrase=args.key)
    listener = _bind(args.host, args.port)
    if args.insecure_plain:
        listener.close()  # llama.cpp's server binds the port itself
    public = f"{args.host}:{args.port}"
    if args.insecure_plain:
        print(f"warning: --insecure-plain on {public}: {rpc.SECURITY_WARNING}", file=sys.stderr)
    backend = ServerProcess(
        ServerSettings(
            public if identity is None else f"{rpc.LOOPBACK}:{free_loopback_port()}",
            (device,),
            threads,
            str(cache) if cache else None,
            keepalive=identity is None,
        ),
        worker_folder() / f"llama-rpc-{args.port}.log",
        _say,
    )
    try:
        backend.start()
        mode = "plain, no key" if identity is None else "TLS, key required"
        _say(f"serving {device} on {public} with {threads} threads, {mode} (Ctrl-C stops it)")
        if identity is None:
            backend.wait()
            return 1
        listener.listen(16)
        _print_key(identity, args.host, args.port)
        from app.llama.rpc_front import Front  # noqa: PLC0415 - the keyed worker only

        Front(identity, listener, backend, _say).serve_forever()
    except (KeyboardInterrupt, Interrupted):
        return 0  # Ctrl+C (or SIGTERM) is how a worker is meant to stop
    finally:
        backend.stop()
        listener.close()
    return 1
