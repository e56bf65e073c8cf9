"""Hugging Face Hub downloads of GGUF files, through huggingface_hub's own client.

- `list_gguf_files(repo)` lists a repository's GGUF files with sizes and LFS sha256 (tree API).
- `select_file(files, pattern)` picks one by exact name, glob or plain substring; none or several
  matches end in a `DownloadError` that lists the options. A split model counts as one file.
- `download_file(repo, file)` fetches one file into `<dest>/<its repository path>` (see
  transfer.py: resumable, cancellable within a second even while the server stalls, checked
  against the Hub's sha256 and vetted as a GGUF before it lands; names.py for the path rules).
- `pull(repo, pattern)` = list + select + download (every part of a split model).

`HF_ENDPOINT` is read when a function runs, not when huggingface_hub was imported, and can be
overridden per call with `endpoint=`. Failures are `DownloadError`s with a one-line message; a
user's stop is `Cancelled`. Partial files are kept where resuming makes sense (network failure,
cancellation) and removed where it does not (checksum mismatch, not a GGUF, full disk).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict, Unpack

from models.hub.endpoint import set_aside_bad_env_endpoint

set_aside_bad_env_endpoint()  # before the imports below load huggingface_hub

from models.hub.common import DEFAULT_ENDPOINT, check_repo_id, resolve_endpoint  # noqa: E402
from models.hub.listing import RemoteFile, list_gguf_files, parts_of, select_file  # noqa: E402
from models.hub.names import default_destination, safe_repo_path  # noqa: E402
from models.hub.transfer import (  # noqa: E402
    STALL_LIMIT_S,
    CancelFlag,
    DownloadProgress,
    ProgressCallback,
    download_file,
    partial_path,
)

__all__ = [
    "DEFAULT_ENDPOINT",
    "STALL_LIMIT_S",
    "DownloadOptions",
    "DownloadProgress",
    "RemoteFile",
    "check_repo_id",
    "default_destination",
    "download_file",
    "list_gguf_files",
    "partial_path",
    "pull",
    "resolve_endpoint",
    "safe_repo_path",
    "select_file",
]


class DownloadOptions(TypedDict, total=False):
    """The keywords `pull` passes on to `download_file` for every part."""

    dest_dir: str | os.PathLike[str] | None
    progress: ProgressCallback | None
    cancel: CancelFlag | None
    retries: int
    replace: bool


def pull(
    repo_id: str,
    pattern: str | None = None,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | bool | None = None,
    **options: Unpack[DownloadOptions],
) -> list[Path]:
    """List, choose and download one model (all parts of a split one). First part first."""
    files = list_gguf_files(repo_id, revision=revision, endpoint=endpoint, token=token)
    chosen = select_file(files, pattern, repo_id=repo_id)
    return [
        download_file(repo_id, part, revision=revision, endpoint=endpoint, token=token, **options)
        for part in parts_of(files, chosen)
    ]
