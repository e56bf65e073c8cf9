"""The child side of IsolatedRuntime: a Runtime driven by messages over a pipe.

Runs in a process of its own because llama.cpp aborts the process when an RPC worker drops its
connection or answers garbage. Its stdout and stderr go to a log file that the parent reads to
say why the child died; every reply is ("ok", value) or ("error", exception), and a generation
streams ("event", event) messages until ("done", None).
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from app.engine.control import GenerationControl
from app.engine.runtime import DraftVetter, Runtime
from app.errors import SpecChatError
from app.llama import rpc
from app.llama.backend import LLAMA_LOG_NAME
from app.llama.rpc_keepalive import start_keepalive_thread


def _redirect_output(log_path: str) -> None:
    # llama.cpp writes its abort message straight to file descriptor 2; the parent shows the
    # user one line made from it, never the raw dump on its own terminal.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    llama_log = logging.getLogger(LLAMA_LOG_NAME)
    llama_log.addHandler(handler)
    llama_log.setLevel(logging.DEBUG)  # "RPC server version mismatch" arrives as a log line


def _portable(exc: SpecChatError) -> SpecChatError:
    # An exception whose __init__ takes other arguments than its message cannot be unpickled;
    # send the same sentence under the common base class then.
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return SpecChatError(str(exc))
    return exc


def _generate(conn: Connection, runtime: Runtime, args: tuple[Any, ...]) -> None:
    prompt_ids, config, state = args
    control = GenerationControl(*state)
    for event in runtime.generate(prompt_ids, config, control):
        conn.send(("event", event))
        while conn.poll():
            _, new_state = conn.recv()  # only ("control", state) arrives mid-generation
            control.stop_requested, control.speculative, control.gamma = new_state
    conn.send(("done", None))


def serve(conn: Connection, log_path: str, vet_draft: DraftVetter | None) -> None:
    """The child's main loop; returns when told to close or when the parent goes away."""
    _redirect_output(log_path)
    os.environ["GGML_NO_BACKTRACE"] = "1"  # an abort here is expected, not a bug to debug
    start_keepalive_thread()  # a vanished worker machine then ends this process too

    def progress(fraction: float) -> bool:
        conn.send(("progress", fraction))
        return True

    runtime = Runtime(vet_draft=vet_draft)
    handlers: dict[str, Callable[..., Any]] = {
        "ready": rpc.local_devices,  # loads llama.cpp and binds ggml
        "connect": rpc.add_server,
        "load_target": lambda config: runtime.load_target(config, progress),
        "load_draft": lambda config, vetted: runtime.load_draft(config, progress, vetted=vetted),
        "check_draft": runtime.check_draft,
        "use_suffix_index": runtime.use_suffix_index,
        "clear_draft": runtime.clear_draft,
        "unload": runtime.unload,
        "chat_prompt": runtime.chat_prompt,
        "text_prompt": runtime.text_prompt,
        "mode": lambda: runtime.mode,
        "memory": runtime.memory,
        "worker_memory": rpc.registered_memory,
    }
    try:
        while True:
            try:
                command, args = conn.recv()
            except EOFError:
                return
            if command == "close":
                conn.send(("ok", None))
                return
            if command == "control":
                continue  # a change that arrived after its generation ended
            try:
                if command == "generate":
                    _generate(conn, runtime, args)
                else:
                    conn.send(("ok", handlers[command](*args)))
            except SpecChatError as exc:
                conn.send(("error", _portable(exc)))
    finally:
        runtime.close()
