"""Where a derived model file is written before it is whole.

Beside its final name and unique to this process and thread, so two writers of the same file
(two windows started at once, two test runs sharing a model cache) never write into one file:
each writes its own copy and renames it into place whole (os.replace is atomic), the last one
winning. The name still ends in `.partial`, which model discovery passes over.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def partial_path(dst: Path) -> Path:
    return dst.with_name(f"{dst.name}.{os.getpid()}-{threading.get_ident()}.partial")
