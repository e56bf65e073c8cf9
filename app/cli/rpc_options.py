"""`--rpc` and `--draft-rpc`: the command-line options that put a model's layers on RPC workers.

Shared by every command that loads models (generate, bench, serve), so the flags read the same
everywhere. The parsed arguments keep each worker's key (KEY@HOST:PORT) so a command run in a
child process (app/cli/contained.py) still has them; reading the endpoints makes the keys known
to the process that reads them.
"""

from __future__ import annotations

import argparse
import os
import sys

from app.errors import InvalidSettingError, user_message
from app.llama import rpc, rpc_keys


def _workers(value: str) -> tuple[str, ...]:
    try:
        specs = rpc.parse_worker_specs(value)
    except InvalidSettingError as exc:
        raise argparse.ArgumentTypeError(user_message(exc)) from None
    plain_by_default = os.environ.get(rpc_keys.RPC_KEY_ENV, "").lower() == rpc_keys.PLAIN
    for spec in specs:
        key, endpoint = rpc_keys.split_key(spec)
        if key == rpc_keys.PLAIN or (key is None and plain_by_default):
            # Named in the environment it is as much a downgrade: said as loudly.
            how = "" if key else f" ({rpc_keys.RPC_KEY_ENV}=plain)"
            print(
                f"warning: RPC worker {endpoint} is reached without a key or encryption"
                f"{how}: {rpc.SECURITY_WARNING}",
                file=sys.stderr,
            )
    return specs


def add_rpc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rpc",
        type=_workers,
        default=(),
        metavar="KEY@HOST:PORT[,...]",
        help="run the target's layers on these `specchat worker`s (llama.cpp RPC), split "
        "by their free memory; the file stays here and its weights are sent at load. KEY is "
        f"the key the worker printed (or set {rpc_keys.RPC_KEY_ENV}); plain@HOST:PORT reaches "
        "llama.cpp's rpc-server or a worker started with --insecure-plain, unencrypted",
    )
    parser.add_argument(
        "--draft-rpc",
        type=_workers,
        default=(),
        metavar="KEY@HOST:PORT[,...]",
        help="run the draft's layers on these workers. A draft is usually best kept local: "
        "it is small, and every drafted token would cost a network round trip",
    )


def check_worker_keys(args: argparse.Namespace) -> None:
    """One worker given two keys (in --rpc and --draft-rpc, or twice in one) is refused: the
    last one named would be used for both, silently."""
    keys: dict[str, str] = {}
    for spec in (*(getattr(args, "rpc", ()) or ()), *(getattr(args, "draft_rpc", ()) or ())):
        key, endpoint = rpc_keys.split_key(spec)
        if key is None:
            continue  # uses the key given with it elsewhere, or SPECCHAT_RPC_KEY
        if keys.setdefault(endpoint, key) != key:
            raise InvalidSettingError(
                f"RPC worker {endpoint} is given two different keys; give it the same one in "
                "--rpc and --draft-rpc"
            )


def target_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    return rpc.endpoints_of(getattr(args, "rpc", ()) or ())


def draft_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    return rpc.endpoints_of(getattr(args, "draft_rpc", ()) or ())


def uses_rpc(args: argparse.Namespace) -> bool:
    return bool(target_endpoints(args) or draft_endpoints(args))
