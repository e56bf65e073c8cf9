"""Run a command and measure it: exit status or signal, output, wall time, peak memory.

Peak memory is the largest resident set of the process and its descendants (a child-process
load check included), sampled every 20 ms once the command runs. The kernel's own figure
(wait4's ru_maxrss) cannot be used: it counts the moment between fork and exec, when the child
still maps the whole test process, so it would blame a command for the test suite's memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

__all__ = ["Measured", "run_measured"]


@dataclass(frozen=True)
class Measured:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    seconds: float
    max_rss_bytes: int
    timed_out: bool

    @property
    def signal_death(self) -> bool:
        return self.returncode < 0 and not self.timed_out


def run_measured(
    command: Sequence[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Measured:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=cwd)
        timed_out = False
        peak = 0
        command_line = list(command)
        while True:
            peak = max(peak, _tree_rss(proc.pid, command_line))
            pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                timed_out = True
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, _usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return Measured(
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            seconds=seconds,
            max_rss_bytes=peak,
            timed_out=timed_out,
        )


def _tree_rss(pid: int, command: list[str]) -> int:
    """Resident bytes of `pid` and its children, once `pid` runs `command` (0 before exec)."""
    try:
        process = psutil.Process(pid)
        if process.cmdline() != command:
            return 0  # still the fork of the test process, not yet the command
        rss = process.memory_info().rss
        for child in process.children(recursive=True):
            try:
                rss += child.memory_info().rss
            except psutil.Error:
                continue
        return int(rss)
    except psutil.Error:
        return 0
