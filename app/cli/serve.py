"""The `specchat serve` sub-command: an OpenAI-compatible server on localhost.

`specchat serve --target PATH|demo [--draft PATH|demo|suffix|none] [--gamma auto|off|N] [--exact]
[--host 127.0.0.1] [--port 8080] [--api-key KEY] [--n-ctx N] [--n-gpu-layers N] ...`

Binds 127.0.0.1 unless told otherwise; any other host gets a one-line warning. The models are
loaded here and handed to one RuntimeOwner thread (app/engine/job_queue.py) that runs every request.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.cli.args import (
    add_generation_arguments,
    check_draft_args,
    check_model_args,
    check_utf8,
    draft_source,
    generation_from_args,
)
from app.cli.loading import load_models, load_runtime
from app.cli.rpc_options import add_rpc_arguments, uses_rpc
from app.cli.signals import Interrupted
from app.engine.job_queue import DEFAULT_QUEUE_SIZE
from app.errors import InvalidSettingError
from app.leftovers import scratch_dir
from app.server.host import exposure_warning, listen, make_server, url_of
from app.server.limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    Limits,
)
from app.server.schemas import n_max_of

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
API_KEY_ENV = "SPECCHAT_API_KEY"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="answer the OpenAI API on localhost with speculative decoding",
        description="Serves /v1/chat/completions, /v1/completions, /v1/models and /health. "
        "Requests run one at a time, in order; each answer carries llama-server-style "
        "`timings` and a `speculation` object.",
    )
    # Its --gamma is the default of each request's speculative.n_max.
    add_generation_arguments(serve)
    add_rpc_arguments(serve)
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="TCP port (0 picks a free one)"
    )
    serve.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV) or None,
        help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV}, else no key)",
    )
    serve.add_argument(
        "--queue-size",
        type=int,
        default=DEFAULT_QUEUE_SIZE,
        help="requests that may wait behind the running one; more get HTTP 503",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser pages from ORIGIN (repeatable; '*' allows any); default none",
    )
    _add_limit_arguments(serve)
    serve.set_defaults(handler=run_serve, check=check_serve_args)


def _add_limit_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to NAME (repeatable; '*' allows any); by default "
        "only loopback names and the --host address, against DNS rebinding",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="S",
        help="close a connection whose request head has not arrived within S seconds",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="S",
        help="answer 408 to a request whose body has not arrived within S seconds",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections at most; one more gets HTTP 503",
    )
    serve.add_argument(
        "--max-messages",
        type=int,
        default=None,
        metavar="N",
        help="messages per chat request at most (default: a quarter of the context size)",
    )
    serve.add_argument(
        "--max-prompt-chars",
        type=int,
        default=None,
        metavar="N",
        help="prompt characters per request at most (default: what the context could hold)",
    )


# Each Limits field and the flag that sets it, in the order they are checked.
_LIMIT_FLAGS = {
    "header_timeout_s": "--header-timeout",
    "body_timeout_s": "--body-timeout",
    "max_connections": "--max-connections",
    "max_messages": "--max-messages",
    "max_prompt_chars": "--max-prompt-chars",
}


def _limits(args: argparse.Namespace) -> Limits:
    values: dict[str, Any] = {}
    for field, flag in _LIMIT_FLAGS.items():
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if value is not None and not 0 < value < math.inf:  # also refuses nan
            raise InvalidSettingError(f"{flag} must be a number greater than 0, got {value}")
        values[field] = value
    return Limits(**values)


def check_serve_args(args: argparse.Namespace) -> None:
    """Every flag's value, before anything loads: exit status 2, like every usage error."""
    check_model_args(args)
    check_draft_args(args)
    generation_from_args(args, args.gamma).validate()
    if args.queue_size < 1:
        raise InvalidSettingError(f"--queue-size must be at least 1, got {args.queue_size}")
    if not 0 <= args.port <= 65535:
        raise InvalidSettingError(f"--port must be between 0 and 65535, got {args.port}")
    if args.api_key is not None:
        # `--api-key "$KEY"` with KEY unset would otherwise serve with no key at all.
        if not args.api_key.strip():
            raise InvalidSettingError("--api-key is empty; leave it out to serve without a key")
        check_utf8("--api-key", args.api_key)
    for origin in args.cors_origin:
        if origin != "*" and not _is_origin(origin):
            # A browser sends scheme://host[:port] exactly; "http://localhost:3000/" would
            # never match it, and every request from that page would get 403.
            raise InvalidSettingError(
                f"--cors-origin {origin!r} is not an origin: scheme://host[:port] with no "
                "path, such as http://localhost:3000"
            )
    _limits(args)


def _is_origin(text: str) -> bool:
    try:
        parts = urlsplit(text)
        _ = parts.port  # a port that is not a number raises
    except ValueError:
        return False
    plain = not (parts.path or parts.query or parts.fragment or parts.username)
    return bool(parts.scheme and parts.hostname) and plain and "?" not in text and "#" not in text


def run_serve(args: argparse.Namespace) -> int:
    from app.engine.job_queue import RuntimeOwner  # noqa: PLC0415
    from app.server.app import ServerSettings, create_app  # noqa: PLC0415 - web stack on demand
    from app.server.schemas import Defaults  # noqa: PLC0415

    config = generation_from_args(args, args.gamma)  # checked by check_serve_args
    limits = _limits(args)
    sock = _listen(args.host, args.port, keyed=bool(args.api_key))
    # The server's own past replies, in memory for the life of the process: a question asked
    # again drafts its old answer. Never written out, and never the window's chats.
    # Named by this process, so the next start removes it if this one is killed outright.
    history = None if args.suffix == "off" else scratch_dir("serve")
    try:
        draft = draft_source(args)
        runtime = load_runtime(
            args,
            draft,
            history_dir=None if history is None else Path(history.name),
            after_loss="the reply so far is kept; the server loads the models again as soon as "
            "the worker answers",
        )
        # Models on RPC workers go with a worker that stops answering: loaded again at the
        # next request, so the server serves on once the worker is back.
        reload = (lambda: load_models(runtime, args, draft)) if uses_rpc(args) else None
        owner = RuntimeOwner(runtime, max_queue=args.queue_size, reload=reload)
    except BaseException:
        sock.close()
        if history is not None:
            history.cleanup()
        raise
    try:
        target = runtime.target_facts
        assert target is not None
        settings = ServerSettings(
            defaults=Defaults(
                config,
                n_max_of(args.gamma),
                runtime.tool_dialect(),
                drafts=runtime.mode != "plain",
            ),
            model_id=Path(target.path).stem,
            n_ctx=target.n_ctx,
            api_key=args.api_key or None,
            cors_origins=tuple(args.cors_origin),
            allowed_hosts=(args.host, str(sock.getsockname()[0]), *args.allow_host),
            limits=limits,
        )
        key = "API key required" if settings.api_key else "no API key"
        banner = (
            f"specchat: serving {settings.model_id} ({runtime.mode}) at "
            f"{url_of(sock)} ({key}); Ctrl+C stops"
        )
        _serve(create_app(owner, settings), sock, banner, owner.stop_accepting, limits)
    except (KeyboardInterrupt, Interrupted):
        pass  # Ctrl+C (or SIGTERM) is how a server is meant to stop
    finally:
        owner.close()
        sock.close()
        if history is not None:
            history.cleanup()
    return 0


def _serve(
    app: object,
    sock: socket.socket,
    banner: str,
    on_shutdown: Callable[[], None],
    limits: Limits,
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    print(banner, file=sys.stderr, flush=True)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal under the
    # handler it found (main's, which raises Interrupted): run_serve ends there, exit status 0.
    make_server(app, on_shutdown, limits).run(sockets=[sock])


def _listen(host: str, port: int, *, keyed: bool) -> socket.socket:
    sock = listen(host, port)
    warning = exposure_warning(host, str(sock.getsockname()[0]), keyed=keyed)
    if warning:
        print(warning, file=sys.stderr)
    return sock
