"""User preferences behind one QSettings adapter with one table of defaults.

Keys are stored as written here: do not rename or reuse a key, old preference files carry them.
Values are stored as plain strings, numbers and lists, never translated labels.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, TypeVar, cast

from PySide6.QtCore import QByteArray, QObject, QSettings, QTimer, Signal

from app.errors import SpecChatError
from app.llama.config import DEFAULT_PROMPT_CACHE_MIB
from app.metrics.cost_model import MAX_GAMMA
from app.paths import create_private_file, data_dir

log = logging.getLogger(__name__)

# Values of "models/draft" (stored on disk: do not change).
DRAFT_AUTO = ""  # the demo's Q4_1 draft with the demo target, no draft otherwise
DRAFT_NONE = "none"
DRAFT_NGRAM = "ngram"

DEFAULTS: dict[str, Any] = {
    # Model choice. An empty target means "the demo pair" (F32 target, Q4_1 draft).
    "models/target": "",
    # A GGUF path, DRAFT_NGRAM, DRAFT_NONE or DRAFT_AUTO.
    "models/draft": DRAFT_AUTO,
    # The draft last used with each target, as "target\tdraft" lines: switching back to a
    # target brings its draft back.
    "models/draft_by_target": [],
    "models/extra_files": [],  # GGUF files the user added by dialog or drag-and-drop
    "models/extra_folders": [],  # folders of GGUF files added in the Models dialog
    "models/last_folder": "",  # where Add GGUF… last found files (empty: the home folder)
    "models/target_gpu_layers": -1,  # -1 = all layers on the GPU (none on a CPU-only build)
    "models/draft_gpu_layers": -1,
    "models/n_ctx": 4096,
    "models/n_threads": 0,  # 0 = automatic: the physical cores other programs leave free
    # Host memory for the target's cache states of chats left for another (0 = none).
    "models/prompt_cache_mib": DEFAULT_PROMPT_CACHE_MIB,
    # A draft model drafts together with the chat history (the suffix index): the hybrid.
    "models/draft_with_history": True,
    # llama.cpp RPC workers ("KEY@host:port,...") that hold the target's or the draft's
    # layers; empty = this machine only.
    "models/target_rpc": "",
    "models/draft_rpc": "",
    "generation/speculation": True,
    "generation/gamma": 0,  # the γ box's 0 = Auto (adaptive draft length), the default
    "generation/max_tokens": 512,
    "generation/temperature": 0.0,  # 0 = greedy
    "generation/top_p": 1.0,
    "generation/top_k": 0,  # 0 = off
    "generation/seed": -1,  # -1 = a fresh random seed per reply
    "generation/system_prompt": "",
    # Every target pass checks two or more rows, so speculation cannot change a greedy reply.
    "generation/exact": False,
    "view/highlight_draft": True,
    "view/theme": "system",  # a key of ui.themes.THEMES
    # The window's Local server (off at every start; only ever on 127.0.0.1).
    "server/port": 8080,
    "server/api_key": "",
    "window/geometry": QByteArray(),
    "window/splitter": QByteArray(),
}

# What a number may be, the one home of these bounds: the controls offer exactly this range,
# and a stored value outside it (a hand-edited settings.ini, another version's file) reads as
# the default, so what the window shows is what a reply uses and no control is handed a value
# it cannot hold (a Qt spin box takes 32-bit integers only).
INT_RANGES: dict[str, tuple[int, int]] = {
    "models/target_gpu_layers": (-1, 999),
    "models/draft_gpu_layers": (-1, 999),
    "models/n_ctx": (256, 131072),
    # No more than the machine runs at once: llama.cpp's threads spin while they wait, and 256
    # of them on 2 cores wrote 0.3 tokens/s where 2 wrote 14.
    "models/n_threads": (0, os.cpu_count() or 1),
    "models/prompt_cache_mib": (0, 65536),
    "generation/gamma": (0, MAX_GAMMA),
    "generation/max_tokens": (1, 8192),
    "generation/top_k": (0, 1000),
    "generation/seed": (-1, 2**31 - 1),
    "server/port": (1024, 65535),
}
FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "generation/temperature": (0.0, 2.0),
    "generation/top_p": (0.0, 1.0),  # 0 keeps the most likely token alone (SamplingConfig)
}

T = TypeVar("T")


def settings_file() -> Path:
    # In the data folder next to the conversations: one place to back up or delete, and
    # SPECCHAT_DATA_DIR isolates tests from the user's real preferences for free.
    return data_dir() / "settings.ini"


# A change is written to disk this long after the last one: a spin box held down changes
# a value many times a second, and one write says as much as all of them.
SAVE_DELAY_MS = 500


class SettingsFileError(SpecChatError):
    """The settings file cannot be opened: a folder in its place, a file the user cannot
    write."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"cannot open the settings file {path}: {reason}; move it aside or make it "
            "writable, and SpecChat starts with its defaults"
        )


class Settings(QObject):
    """Typed access to preferences.

    Signals:
        changed(str): a key whose value changed (setters ignore writes of the same value).
        saveFailed(str): the file could not be written (a full disk, a read-only file); said
            once. Changes then last until the window closes.
    """

    changed = Signal(str)
    saveFailed = Signal(str)

    def __init__(self, backend: QSettings | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        if backend is None:
            path = settings_file()
            try:
                create_private_file(path)
            except OSError as exc:
                raise SettingsFileError(path, exc.strerror or str(exc)) from None
            backend = QSettings(str(path), QSettings.Format.IniFormat)
        self._qs = backend
        self._failing = False
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.sync)

    def value(self, key: str) -> Any:
        default = DEFAULTS[key]
        value = _coerce(self._qs.value(key, default), default)
        bounds = INT_RANGES.get(key) or FLOAT_RANGES.get(key)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:  # NaN included
            return default
        return value

    def get_bool(self, key: str) -> bool:
        return self._typed(key, bool)

    def get_int(self, key: str) -> int:
        return self._typed(key, int)

    def get_float(self, key: str) -> float:
        return self._typed(key, float)

    def get_str(self, key: str) -> str:
        return self._typed(key, str)

    def get_list(self, key: str) -> list[str]:
        return cast(list[str], self._typed(key, list))

    def get_bytes(self, key: str) -> QByteArray:
        return self._typed(key, QByteArray)

    def _typed(self, key: str, kind: type[T]) -> T:
        if not isinstance(DEFAULTS[key], kind):
            raise TypeError(f"setting {key} is not a {kind.__name__}")
        return cast(T, self.value(key))

    def set(self, key: str, value: Any) -> None:
        if key not in DEFAULTS:
            raise KeyError(f"unknown setting {key}")
        if self.value(key) == value:
            return
        self._qs.setValue(key, value)
        self.changed.emit(key)
        self._save_timer.start()

    def sync(self) -> bool:
        """Write pending changes now; False (and saveFailed, the first time) when the disk
        refused. QSettings keeps its first error for the object's life, so once refused, every
        later sync reads as refused: said once, then only returned."""
        self._save_timer.stop()
        self._qs.sync()
        # FormatError is the file's reading (a hand-edited line without "="), not the write.
        saved = self._qs.status() != QSettings.Status.AccessError
        if not saved and not self._failing:
            message = (
                f"Could not save preferences to {self._qs.fileName()} (a full disk, or a file "
                "that cannot be written); changes last until SpecChat closes."
            )
            log.warning("%s", message)
            self.saveFailed.emit(message)
        self._failing = not saved
        return saved


def _coerce(raw: Any, default: Any) -> Any:
    """INI files give strings back; turn them into the default's type, else the default."""
    try:
        if isinstance(default, bool):
            if isinstance(raw, str):
                return raw.lower() in ("true", "1", "yes")
            return bool(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, list):
            if raw is None or raw == "":
                return []
            return [str(x) for x in raw] if isinstance(raw, list) else [str(raw)]
        if isinstance(default, QByteArray):
            return raw if isinstance(raw, QByteArray) else QByteArray()
        return str(raw) if raw is not None else default
    except (TypeError, ValueError):
        return default
