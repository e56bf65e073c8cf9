"""A `.partial` file as a writer killed mid-way leaves it: named by a process that has ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def dead_pid() -> int:
    """The id of a process that has just ended (and is not reused this soon)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def stale_partial(dst: Path) -> Path:
    """A half-written copy of `dst` left by a killed writer, under partial_path's naming."""
    left = dst.with_name(f"{dst.name}.{dead_pid()}-140.partial")
    left.parent.mkdir(parents=True, exist_ok=True)
    left.write_bytes(b"half")
    return left
