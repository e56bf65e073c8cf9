"""Where SpecChat keeps its data. SPECCHAT_DATA_DIR overrides the platform default (tests)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "specchat"


def data_dir() -> Path:
    override = os.environ.get("SPECCHAT_DATA_DIR")
    path = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    path.mkdir(parents=True, exist_ok=True)
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
