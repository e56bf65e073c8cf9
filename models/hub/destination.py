"""Where one download goes: refused up front when it could never land there, locked while it
is written, and one message when the disk runs out."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import IO

from app.errors import DownloadError


def lock_download(out: IO[bytes], name: str) -> None:
    """One download per file at a time: a second one would interleave its bytes with ours."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only; elsewhere downloads are simply not locked
    except ImportError:
        return
    try:
        fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DownloadError(f"{name} is already being downloaded by another process") from None


def no_space_error(directory: Path, exc: OSError, partial: Path) -> DownloadError:
    with contextlib.suppress(OSError):
        partial.unlink()
    detail = "file size limit reached" if exc.errno == errno.EFBIG else "disk is full"
    return DownloadError(
        f"not enough disk space in {directory} ({detail}); the partial download was removed"
    )


def check_destination(dest: Path, *, keep_other: bool) -> None:
    """Refuse, before a byte is fetched, a destination the download could never take."""
    if dest.is_dir():
        raise DownloadError(f"{dest} is a folder; move it away or pull into another --dest")
    if keep_other and (dest.exists() or dest.is_symlink()):
        raise DownloadError(
            f"{dest} already exists and is not this download; pass --force to replace it, or "
            "pull into another --dest"
        )
