"""Where SpecChat keeps its data (SPECCHAT_DATA_DIR overrides the platform default, for tests),
and when two paths name the same file."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "specchat"


def make_private_dir(path: Path) -> None:
    """Create `path` (and parents) if needed; the folder itself is the owner's alone (0700).

    Chats and settings live here: other users of the machine must not read them, whatever
    the umask. Parents that already exist keep their permissions."""
    path.mkdir(parents=True, exist_ok=True)
    if os.name == "posix" and (path.stat().st_mode & 0o777) != 0o700:
        os.chmod(path, 0o700)


def create_private_file(path: Path) -> None:
    """Create `path` if missing, readable and writable by its owner only (0600, any umask)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    # O_CREAT's mode is filtered by the umask and ignored for existing files: set it outright.
    os.chmod(path, 0o600)


def data_dir() -> Path:
    override = os.environ.get("SPECCHAT_DATA_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    make_private_dir(path)
    return path


def models_dir() -> Path:
    """The app's own models folder: downloads, derived drafts and user imports land here."""
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def demo_models_dir() -> Path:
    path = models_dir() / "demo"
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_path() -> Path:
    return data_dir() / "conversations.sqlite3"


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through links and relative parts; a path that cannot
    be resolved is compared as written."""
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
