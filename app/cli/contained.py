"""Run a whole command in a child process, for commands that drive models on RPC workers.

llama.cpp aborts the process when a worker's connection fails; a command that cannot use
IsolatedRuntime (the benchmark keeps several drafters around one engine) runs in a child
instead, so the user sees one `error:` line rather than a native abort. The child's Python
output still reaches the terminal; only llama.cpp's own writes to stderr go to a log file.

A command whose work is worth keeping when its child dies (the benchmark's finished runs) hands
its results so far to the parent with keep_for_parent; the parent gives the last of them to the
command's salvage function, which writes them as an interrupted run's would be written.
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
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app.cli.output import StdoutError, silence_stdout, worded_stdout
from app.cli.report import print_error
from app.cli.rpc_options import draft_endpoints, target_endpoints
from app.engine.crash_log import crash_error
from app.engine.isolated import probe_workers
from app.errors import SpecChatError
from app.llama.backend import LLAMA_LOG_NAME

Handler = Callable[[argparse.Namespace], int]
Salvage = Callable[[Any], str]
"""salvage(results): write what the child last kept; returns what became of it, said after the
error ("the 4 runs completed before it are reported")."""

_to_parent: list[Connection] = []  # the pipe's writing end, in the child only


def parent_keeps_results() -> bool:
    """Whether this is a contained child whose parent takes keep_for_parent's results."""
    return bool(_to_parent)


def keep_for_parent(results: object) -> None:
    """Hand results (picklable) to the parent, replacing what was handed before."""
    for pipe in list(_to_parent):
        try:
            pipe.send(results)
        except OSError:  # the parent stopped listening (a signal ended it): work on without
            _to_parent.remove(pipe)


def _child(
    handler: Handler, args: argparse.Namespace, log_path: str, to_parent: Connection | None
) -> None:
    if to_parent is not None:
        _to_parent.append(to_parent)
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


def run_contained(
    handler: Handler, args: argparse.Namespace, salvage: Salvage | None = None
) -> int:
    """Check the workers (handshake and version, with timeouts), then run handler in a child;
    if the child dies, salvage (when given) writes the results it last kept."""
    endpoints = list(dict.fromkeys(target_endpoints(args) + draft_endpoints(args)))
    probe_workers(endpoints)
    fd, log_path = tempfile.mkstemp(prefix="specchat-command-", suffix=".log")
    os.close(fd)
    context = multiprocessing.get_context("spawn")
    kept: list[object] = []
    try:
        results, to_parent = context.Pipe(duplex=False) if salvage else (None, None)
        process = context.Process(target=_child, args=(handler, args, log_path, to_parent))
        process.start()
        if results is not None and to_parent is not None:
            to_parent.close()  # the child's copy is the only writer: its end is the pipe's EOF
            kept = _last_kept(results)
        process.join()
        code = process.exitcode
        assert code is not None  # joined
        if code >= 0:
            return code
        log = Path(log_path).read_text(encoding="utf-8", errors="replace")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log_path)
    afterwards = "the command was stopped and its results so far are not saved"
    ended = f"the command's process stopped unexpectedly (signal {-code})"
    if salvage is not None and kept:
        try:
            afterwards = salvage(kept[-1])
        except SpecChatError as exc:  # the report could not be written: said, then why it ended
            print_error(exc)
        else:
            ended = f"{ended}; {afterwards}"
    raise crash_error(log, endpoints, afterwards=afterwards, ended=ended)


def _last_kept(results: Connection) -> list[object]:
    """Read what the child hands over until it exits; only the last is kept."""
    last: list[object] = []
    with results:
        while True:
            try:
                last = [results.recv()]
            except (EOFError, OSError):
                return last
