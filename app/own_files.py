"""Files the app wrote itself and reads back (the past-chats index, its journal, its deletion
stamp): whatever is found under their names is read only when it is a regular file, and never
past a bound. A named pipe there would block the read for ever, a link to /dev/zero fill the
memory; each is an OSError instead, which the callers treat as a damaged file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

# Far past any index the app writes (300,000 tokens take about 17 MB).
OWN_FILE_LIMIT = 2**31


def open_own_file(path: Path) -> BinaryIO:
    """`path` opened for reading; OSError (FileNotFoundError when missing) unless it is a
    regular file no larger than OWN_FILE_LIMIT."""
    # Non-blocking: opening a named pipe would otherwise wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > OWN_FILE_LIMIT:
            raise OSError(errno.EFBIG, "larger than any file the app writes", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_own_file(path: Path) -> bytes:
    """The whole of `path`, on the terms of open_own_file."""
    with open_own_file(path) as handle:
        # Asked for the bound itself, a buffered read sets aside that much memory first.
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(size + 1)
        if len(data) > size:  # it grew while being read: the rest, within the bound
            data += handle.read(OWN_FILE_LIMIT + 1 - len(data))
    if len(data) > OWN_FILE_LIMIT:
        raise OSError(errno.EFBIG, "larger than any file the app writes", str(path))
    return data
