"""Run a command and measure it: exit status or signal, output, wall time, peak memory.

Peak memory is the largest resident set of the process and every descendant it waited for (a
child-process load check included), as the kernel reports it through wait4.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

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
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                timed_out = True
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
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
            max_rss_bytes=int(usage.ru_maxrss) * 1024,  # Linux reports KiB
            timed_out=timed_out,
        )
