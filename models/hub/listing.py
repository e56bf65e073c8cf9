"""A Hub repository's GGUF files: listed, matched against a user's pattern, split parts grouped."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote

from huggingface_hub import get_session, hf_raise_for_status
from huggingface_hub.utils import build_hf_headers

from app.errors import DownloadError
from models.gguf import shard_info
from models.hub.common import (
    LISTING_TIMEOUT,
    check_repo_id,
    hub_errors,
    resolve_endpoint,
    size_text,
)
from models.terminal import printable

__all__ = ["RemoteFile", "list_gguf_files", "parts_of", "select_file"]

_SHOWN_OPTIONS = 12
_MAX_PAGES = 100


@dataclass(frozen=True)
class RemoteFile:
    """A GGUF file in a Hub repository."""

    path: str  # path inside the repository
    size: int
    sha256: str | None  # LFS object id; None for files not stored in LFS

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def shard(self) -> tuple[int, int] | None:
        return shard_info(self.name)


def _is_gguf_name(name: str) -> bool:
    return name.lower().endswith(".gguf")


def list_gguf_files(
    repo_id: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> list[RemoteFile]:
    """Every GGUF file in the repository (all folders), with size and LFS sha256.

    One plain GET per page of the tree API, without the client library's retry loop: an offline
    machine gets its one-line answer at once, not after half a minute of retries.
    """
    check_repo_id(repo_id)
    ep = resolve_endpoint(endpoint)
    url: str | None = f"{ep}/api/models/{repo_id}/tree/{quote(revision, safe='')}"
    params: dict[str, str] | None = {"recursive": "true", "expand": "false"}
    headers = build_hf_headers(token=token)
    files: list[RemoteFile] = []
    with hub_errors(repo_id, ep, revision=revision):
        for _page in range(_MAX_PAGES):
            if url is None:
                break
            response = get_session().get(
                url, params=params, headers=headers, timeout=LISTING_TIMEOUT
            )
            hf_raise_for_status(response)
            files.extend(_gguf_entries(response.json()))
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
    return sorted(files, key=lambda f: f.path)


def _gguf_entries(items: object) -> list[RemoteFile]:
    if not isinstance(items, list):
        raise ValueError("the file list is not a JSON list")
    out: list[RemoteFile] = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") != "file":
            continue
        path = item.get("path")
        if not isinstance(path, str) or not _is_gguf_name(path):
            continue
        lfs = item.get("lfs")
        if isinstance(lfs, dict):
            size, sha = lfs.get("size"), str(lfs.get("oid", "")).lower() or None
        else:
            size, sha = item.get("size"), None
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            out.append(RemoteFile(path, size, sha))
    return out


def _shard_key(f: RemoteFile) -> tuple[str, int] | None:
    shard = f.shard
    if shard is None:
        return None
    return (f.path[: -len("-00001-of-00002.gguf")], shard[1])


def _logical(files: Sequence[RemoteFile]) -> list[RemoteFile]:
    """One entry per model: a split model is represented by its first part."""
    out: list[RemoteFile] = []
    seen: set[tuple[str, int]] = set()
    for f in sorted(files, key=lambda x: x.path):
        key = _shard_key(f)
        if key is None:
            out.append(f)
        elif key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _describe(files: Sequence[RemoteFile], all_files: Sequence[RemoteFile]) -> str:
    shown = []
    for f in files[:_SHOWN_OPTIONS]:
        key = _shard_key(f)
        if key is None:
            shown.append(f"{printable(f.path)} ({size_text(f.size)})")
        else:
            total = sum(x.size for x in all_files if _shard_key(x) == key)
            shown.append(f"{printable(f.path)} ({size_text(total)} in {key[1]} parts)")
    more = len(files) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _exact(files: Sequence[RemoteFile], pattern: str) -> list[RemoteFile]:
    """The files `pattern` names exactly, the closest kind of match first: the path as spelled
    (a leading "/" means the repository's root), then regardless of case, then the file name
    as spelled, then regardless of case. A path is one file, so a root-level `model.gguf`
    is never ambiguous with `Q2/model.gguf` or `Model.gguf`."""
    path = pattern.removeprefix("/")
    kinds: list[Callable[[RemoteFile], bool]] = [
        lambda f: f.path == path,
        lambda f: f.path.lower() == path.lower(),
    ]
    if not pattern.startswith("/"):
        kinds += [lambda f: f.name == pattern, lambda f: f.name.lower() == pattern.lower()]
    for matches_kind in kinds:
        found = [f for f in files if matches_kind(f)]
        if found:
            return found
    return []


def select_file(
    files: Sequence[RemoteFile], pattern: str | None = None, *, repo_id: str = "the repository"
) -> RemoteFile:
    """Pick one file: exact path or name (see _exact), else glob, else case-insensitive substring.

    A split model matches as one file (its first part is returned; `pull` fetches every part).
    """
    if not files:
        raise DownloadError(f"{repo_id} has no GGUF files")
    logical = _logical(files)
    if pattern is None:
        matches = logical
    else:
        needle = pattern.lower()
        exact = _exact(files, pattern)
        if exact:
            matches = _logical(exact)
        elif any(ch in pattern for ch in "*?["):
            matches = _logical(
                [
                    f
                    for f in files
                    if fnmatch.fnmatch(f.path.lower(), needle)
                    or fnmatch.fnmatch(f.name.lower(), needle)
                ]
            )
        else:
            matches = _logical([f for f in files if needle in f.path.lower()])
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise DownloadError(
            f"no GGUF file in {repo_id} matches {pattern!r}; available: {_describe(logical, files)}"
        )
    what = f"{pattern!r} matches" if pattern is not None else "there are"
    raise DownloadError(
        f"{what} {len(matches)} GGUF files in {repo_id}; pick one with --file: "
        f"{_describe(matches, files)}"
    )


def parts_of(files: Sequence[RemoteFile], chosen: RemoteFile) -> list[RemoteFile]:
    key = _shard_key(chosen)
    if key is None:
        return [chosen]
    parts = sorted((f for f in files if _shard_key(f) == key), key=lambda f: f.path)
    numbers = [p.shard[0] for p in parts if p.shard is not None]
    if numbers != list(range(1, key[1] + 1)):
        raise DownloadError(
            f"{printable(chosen.path)} is part of a {key[1]}-part model but the repository "
            f"has parts {numbers}"
        )
    return parts
