"""`--rpc` and `--draft-rpc`: the command-line options that put a model's layers on RPC workers.

Shared by every command that loads models (generate, bench, serve), so the flags read the same
everywhere.
"""

from __future__ import annotations

import argparse

from app.errors import InvalidSettingError
from app.llama import rpc


def _endpoints(value: str) -> tuple[str, ...]:
    try:
        return rpc.parse_endpoints(value)
    except InvalidSettingError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_rpc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rpc",
        type=_endpoints,
        default=(),
        metavar="HOST:PORT[,HOST:PORT...]",
        help="run the target's layers on these `specchat worker`s (llama.cpp RPC), split "
        "by their free memory; the file stays here and its weights are sent at load",
    )
    parser.add_argument(
        "--draft-rpc",
        type=_endpoints,
        default=(),
        metavar="HOST:PORT[,HOST:PORT...]",
        help="run the draft's layers on these workers. A draft is usually best kept local: "
        "it is small, and every drafted token would cost a network round trip",
    )


def target_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(getattr(args, "rpc", ()) or ())


def draft_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(getattr(args, "draft_rpc", ()) or ())


def uses_rpc(args: argparse.Namespace) -> bool:
    return bool(target_endpoints(args) or draft_endpoints(args))
