"""Where SpecChat keeps its data (SPECCHAT_DATA_DIR overrides the platform default, for tests),
and when two paths name the same file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import platformdirs

from app.errors import SpecChatError

APP_NAME = "specchat"


class DataFolderError(SpecChatError):
    """The data folder (or a folder in it) cannot be created or used: a file is in the way,
    or the system refuses it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot use data folder {path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[type[DataFolderError], tuple[Path, str]]:
        # Rebuilt from its facts when it crosses a process boundary by pickle.
        return (type(self), (self.path, self.reason))


def _folder_error(path: Path, exc: OSError) -> DataFolderError:
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return DataFolderError(path, "a file is in the way (it, or a folder above it, is a file)")
    return DataFolderError(path, exc.strerror or str(exc))


def make_private_dir(path: Path) -> None:
    """Create `path` (and parents) if needed; the folder itself is the owner's alone (0700).

    Chats and settings live here: other users of the machine must not read them, whatever
    the umask. Parents that already exist keep their permissions, and the owner's own bits
    stay as they are (a folder its owner made read-only stays so)."""
    path.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777
    if os.name == "posix" and mode & 0o077:
        os.chmod(path, mode & 0o700)


def create_private_file(path: Path) -> None:
    """Create `path` if missing, readable and writable by its owner only (0600, any umask)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    # O_CREAT's mode is filtered by the umask and ignored for existing files: set it outright.
    os.chmod(path, 0o600)


def data_dir() -> Path:
    """The data folder, created private if missing; DataFolderError when it cannot be."""
    override = os.environ.get("SPECCHAT_DATA_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    try:
        make_private_dir(path)
    except OSError as exc:
        # A file in the way, /proc, a read-only disk: every command needs the folder, so it
        # must end in one sentence, not in a traceback from whichever command asked first.
        raise _folder_error(path, exc) from None
    return path


def _data_subdir(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _folder_error(path, exc) from None
    return path


def models_dir() -> Path:
    """The app's own models folder: downloads, derived drafts and user imports land here."""
    return _data_subdir(data_dir() / "models")


def demo_models_dir() -> Path:
    return _data_subdir(models_dir() / "demo")


def database_path() -> Path:
    return data_dir() / "conversations.sqlite3"


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through links and relative parts; a path that cannot
    be resolved is compared as written."""
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
