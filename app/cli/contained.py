"""Run a whole command in a child process, for commands that drive models on RPC workers.

llama.cpp aborts the process when a worker's connection fails; a command that cannot use
IsolatedRuntime (the benchmark keeps several drafters around one engine) runs in a child
instead, so the user sees one `error:` line rather than a native abort. The child's Python
output still reaches the terminal; only llama.cpp's own writes to stderr go to a log file.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.cli.output import StdoutError, silence_stdout, worded_stdout
from app.cli.report import print_error
from app.cli.rpc_options import draft_endpoints, target_endpoints
from app.engine.crash_log import crash_error
from app.engine.isolated import probe_workers
from app.errors import SpecChatError
from app.llama.backend import LLAMA_LOG_NAME

Handler = Callable[[argparse.Namespace], int]


def _child(handler: Handler, args: argparse.Namespace, log_path: str) -> None:
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)  # Python's lines: the terminal
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 2)  # llama.cpp's lines: the log
    os.close(fd)
    os.environ["GGML_NO_BACKTRACE"] = "1"
    to_log = logging.FileHandler(log_path)
    logging.getLogger(LLAMA_LOG_NAME).addHandler(to_log)
    logging.getLogger(LLAMA_LOG_NAME).setLevel(logging.DEBUG)
    try:
        with worded_stdout():
            code = handler(args)
            sys.stdout.flush()
    except StdoutError as exc:
        print_error(exc)
        silence_stdout()
        code = 1
    except SpecChatError as exc:
        print_error(exc)
        code = 1
    sys.stderr.flush()
    sys.exit(code)


def run_contained(handler: Handler, args: argparse.Namespace) -> int:
    """Check the workers (handshake and version, with timeouts), then run handler in a child."""
    endpoints = list(dict.fromkeys(target_endpoints(args) + draft_endpoints(args)))
    probe_workers(endpoints)
    fd, log_path = tempfile.mkstemp(prefix="specchat-command-", suffix=".log")
    os.close(fd)
    try:
        process = multiprocessing.get_context("spawn").Process(
            target=_child, args=(handler, args, log_path)
        )
        process.start()
        process.join()
        code = process.exitcode
        assert code is not None  # joined
        if code >= 0:
            return code
        log = Path(log_path).read_text(encoding="utf-8", errors="replace")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log_path)
    raise crash_error(
        log,
        endpoints,
        afterwards="the command was stopped and its results so far are not saved",
        ended=f"the command's process stopped unexpectedly (signal {-code})",
    )
