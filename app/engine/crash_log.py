"""Why a process running llama.cpp ended, read from the log it left: the one reader of that log.

llama.cpp aborts the whole process when an RPC worker is unreachable, answers in another
protocol version or in garbage, or drops its connection mid-reply, and prints why on stderr
first. The model process behind IsolatedRuntime and a whole command run in a child
(app/cli/contained.py) both send that stderr to a log file; this turns it into one typed error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.errors import RpcConnectError, RpcWorkerLostError, SpecChatError
from app.llama import rpc

_MISMATCH = re.compile(r"RPC server version mismatch: (\S+)")
# What llama.cpp prints before aborting when a worker's connection fails or carries garbage.
WORKER_LOST_MARKER = "crashed or returned malformed response"


def crash_error(
    log: str,
    endpoints: Sequence[str],
    *,
    afterwards: str,
    ended: str,
    connecting: str | None = None,
) -> SpecChatError:
    """The error that says why the process ended.

    afterwards: what became of the work, said after a lost worker ("the reply so far is
    kept"); ended: the sentence for a death the log does not explain ("the model process
    stopped unexpectedly (exit code -6)"); connecting: the worker being registered when it
    ended, if any.
    """
    refused = rpc.tunnel_refusal(log)
    if refused is not None:
        return refused
    if connecting is not None:
        mismatch = _MISMATCH.search(log)
        if mismatch:
            return RpcConnectError(
                connecting,
                f"it speaks RPC protocol {mismatch.group(1)}, another version than this "
                "SpecChat's llama.cpp; run the same SpecChat and llama-cpp-python on both machines",
            )
        return RpcConnectError(
            connecting,
            "answered something that is not llama.cpp's RPC protocol, or closed the "
            "connection during the handshake (is it a `specchat worker` of the same version?)",
        )
    if WORKER_LOST_MARKER in log:
        workers = ", ".join(endpoints) or "none"
        return RpcWorkerLostError(f"an RPC worker ({workers}) stopped answering; {afterwards}")
    last = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "")
    return RpcWorkerLostError(f"{ended}: {last}" if last else ended)
