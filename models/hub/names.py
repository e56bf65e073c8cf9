"""Where a repository's file lands on disk: its own folder, never outside it, on any OS.

A repository path is kept with its folders (`Q4/model.gguf` and `Q8/model.gguf` are two files),
and refused when any part could step out of the destination or trick a file system or a terminal:
`..`, absolute paths, Windows drive letters and backslashes (`..\\..\\x.gguf` climbs out on
Windows even though it is one harmless name on POSIX), NUL and other control characters,
reserved device names, trailing dots or spaces.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath, PureWindowsPath

from app.errors import DownloadError
from app.paths import models_dir
from models.terminal import printable

__all__ = ["default_destination", "safe_repo_path"]

_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com\d|lpt\d)(\..*)?$", re.IGNORECASE)
_MAX_PART = 255


def default_destination(repo_id: str) -> Path:
    """Where `pull` puts a repository's files: <models_dir>/<owner>/<name>/."""
    owner, _, name = repo_id.partition("/")
    return models_dir() / owner / name


def _odd(part: str) -> bool:
    return (
        part in ("", ".", "..")
        or len(part.encode("utf-8", "surrogatepass")) > _MAX_PART
        or any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in part)
        or any(ch in part for ch in '<>:"|?*\\')
        or part.endswith((".", " "))
        or bool(_WINDOWS_RESERVED.match(part))
    )


def safe_repo_path(filename: str) -> PurePosixPath:
    """The repository path as a relative path that stays inside any destination folder."""
    refusal = DownloadError(f"refusing odd file name {printable(filename)!r}")
    pure = PurePosixPath(filename)
    windows = PureWindowsPath(filename)
    if pure.is_absolute() or windows.anchor or windows.drive or not pure.parts:
        raise refusal
    if any(_odd(part) for part in pure.parts) or len(windows.parts) != len(pure.parts):
        raise refusal
    return pure
