"""Where the commands' results go: stdout and the files named by flags (`bench --json`, ...).

A full disk, a file where a folder should be, a closed pipe: the machine refusing the output is
one `error:` line, never a traceback. Output files are checked when the flags are, before
minutes of measuring, and written at the end, each one whole or not at all (`replace_file`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

from app.durable import replace_file
from app.errors import InvalidSettingError, SpecChatError

# `--json -`: `-` names standard output to most command-line tools (app/cli/args.py reads a
# typed ./- as the file).
STANDARD_OUTPUT = Path("-")


class OutputError(SpecChatError):
    """An output file could not be written (a full disk, no permission, ...)."""


class StdoutError(OutputError):
    """stdout could not be written: what is left in its buffer must not be flushed again."""


class _WordedStdout:
    """stdout whose refused writes raise StdoutError, whoever prints (a command's table,
    argparse, models/cli). A reader that went away (BrokenPipeError) passes through: it is
    not an error worth a line, and main ends quietly on it."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream  # None: started with stdout closed (`>&-`)

    def write(self, text: str) -> int:
        if self._stream is None:
            raise StdoutError("cannot write output: standard output is closed")
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _output_error(exc) from None

    def flush(self) -> None:
        if self._stream is None:
            return  # nothing was written to it
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _output_error(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _output_error(exc: OSError) -> StdoutError:
    return StdoutError(f"cannot write output: {exc.strerror or exc}")


@contextmanager
def worded_stdout() -> Iterator[None]:
    """While it lasts, a write to stdout that the system refuses (a full disk) raises
    StdoutError, which the command reports in one line."""
    stream = sys.stdout
    sys.stdout = cast("TextIO", _WordedStdout(stream))
    try:
        yield
    finally:
        sys.stdout = stream


def write_stdout(text: str) -> None:
    """Write text to stdout and flush it at once: a reply streams, and a refused write fails
    here, in words, rather than in the interpreter's final flush."""
    sys.stdout.write(text)
    sys.stdout.flush()


def silence_stdout() -> None:
    """Point stdout at nothing, so the interpreter's final flush of what a failed write left in
    its buffer does not fail again (and print a traceback-like warning) at exit."""
    if sys.stdout is None:  # closed from the start: nothing to flush
        return
    try:
        stdout = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's capture): nothing will flush it
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stdout)
    os.close(devnull)


def check_output_file(path: Path | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before any work is done for it."""
    if path is None or path == STANDARD_OUTPUT:
        return
    if path.is_dir():
        raise InvalidSettingError(f"{flag} {path} is a folder; name a file to write")
    folder = path.parent
    if not folder.exists():
        raise InvalidSettingError(f"{flag}: folder {folder} does not exist")
    if not folder.is_dir():
        raise InvalidSettingError(f"{flag}: {folder} is not a folder")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK)
    if not writable:
        raise InvalidSettingError(f"{flag}: cannot write {path} (permission denied)")


def write_output_file(path: Path, text: str, flag: str) -> None:
    """Write a result file, or stdout for `-`; a disk or file system that refuses it is one
    error line."""
    if path == STANDARD_OUTPUT:
        write_stdout(text)
        return
    try:
        replace_file(path, lambda temp: temp.write_text(text, encoding="utf-8"))
    except OSError as exc:
        raise OutputError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None
