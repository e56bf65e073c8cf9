"""Which key this process uses for which worker: KEY@HOST:PORT, plain@HOST:PORT, SPECCHAT_RPC_KEY.

A key given with an endpoint is remembered for that endpoint in this process, so the rest of
the program passes plain HOST:PORT strings around (and shows them in messages and panels)
without the secret. SPECCHAT_RPC_KEY serves every endpoint given without one. `plain` asks for
llama.cpp's unencrypted protocol, for llama.cpp's own rpc-server or `specchat worker
--insecure-plain`.
"""

from __future__ import annotations

import os
import threading

from app.llama.rpc_token import WorkerToken, parse_token

RPC_KEY_ENV = "SPECCHAT_RPC_KEY"
PLAIN = "plain"

_lock = threading.Lock()
_known: dict[str, str] = {}


def split_key(item: str) -> tuple[str | None, str]:
    """'KEY@HOST:PORT' -> (KEY, 'HOST:PORT'); no '@' -> (None, item). The key is checked."""
    key, at, endpoint = item.rpartition("@")
    if not at:
        return None, item
    if key.lower() != PLAIN:
        parse_token(key)
    return key.lower(), endpoint


def remember(endpoint: str, key: str) -> None:
    with _lock:
        _known[endpoint] = key


def key_for(endpoint: str) -> str | None:
    """The key text (or PLAIN) to reach endpoint with, or None when none was given."""
    with _lock:
        known = _known.get(endpoint)
    return known or os.environ.get(RPC_KEY_ENV) or None


def token_for(endpoint: str) -> WorkerToken | None:
    """The parsed key for endpoint; None for plain or no key."""
    key = key_for(endpoint)
    if key is None or key.lower() == PLAIN:
        return None
    return parse_token(key)


def spec(endpoint: str) -> str:
    """KEY@HOST:PORT when a key is known, for handing the endpoint to another process."""
    key = key_for(endpoint)
    return f"{key}@{endpoint}" if key else endpoint
