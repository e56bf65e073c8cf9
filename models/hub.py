"""Hugging Face Hub downloads of GGUF files, through huggingface_hub's own client.

- `list_gguf_files(repo)` lists a repository's GGUF files with sizes and LFS sha256 (tree API).
- `select_file(files, pattern)` picks one by exact name, glob or plain substring; none or several
  matches end in a `DownloadError` that lists the options. A split model counts as one file.
- `download_file(repo, file)` fetches one file: HEAD for the commit and size, then a streamed GET
  of that exact commit in chunks, so that progress is reported per chunk, cancellation is checked
  per chunk, and an interrupted transfer resumes with an HTTP Range request (here, after a
  transient drop, or on the next call). The sha256 the Hub reports is checked before the file
  lands. The bytes go to a hidden `.<name>.<id>.incomplete` file next to the destination and are
  renamed into place only when complete and verified, so discovery never sees a partial `.gguf`.
- `pull(repo, pattern)` = list + select + download (every part of a split model).

`HF_ENDPOINT` is read when a function runs, not when huggingface_hub was imported, and can be
overridden per call with `endpoint=`. Failures are `DownloadError`s with a one-line message; a
user's stop is `Cancelled`. Partial files are kept where resuming makes sense (network failure,
cancellation) and removed where it does not (checksum mismatch, full disk).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import (
    HfApi,
    RepoFile,
    get_hf_file_metadata,
    get_session,
    hf_hub_url,
    hf_raise_for_status,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils._validators import validate_repo_id

from app.errors import Cancelled, DownloadError
from app.paths import models_dir
from models.inspect import shard_info

__all__ = [
    "DEFAULT_ENDPOINT",
    "DownloadProgress",
    "RemoteFile",
    "default_destination",
    "download_file",
    "list_gguf_files",
    "partial_path",
    "pull",
    "resolve_endpoint",
    "select_file",
]

DEFAULT_ENDPOINT = "https://huggingface.co"
PROGRESS_EVERY = 256 * 1024  # bytes between two "downloading" progress reports
_HASH_BLOCK = 4 * 1024 * 1024
_SHOWN_OPTIONS = 12
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)


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


@dataclass(frozen=True)
class DownloadProgress:
    filename: str
    downloaded: int
    total: int | None
    phase: str  # "checking" (hashing a partial file), "downloading", "done"
    resumed_from: int = 0

    @property
    def fraction(self) -> float | None:
        return self.downloaded / self.total if self.total else None


class _BadTransferError(Exception):
    """The bytes cannot be used or resumed: the partial file must go."""


ProgressCallback = Callable[[DownloadProgress], None]
CancelFlag = threading.Event | Callable[[], bool]


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The Hub to talk to: `endpoint`, else $HF_ENDPOINT as set now, else huggingface.co."""
    chosen = endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    return chosen.rstrip("/")


def _host(endpoint: str) -> str:
    return urlsplit(endpoint).netloc or endpoint


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def _size(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else _mib(n)


@contextlib.contextmanager
def _hub_errors(
    repo_id: str, endpoint: str, *, revision: str | None = None, filename: str | None = None
) -> Iterator[None]:
    """Turn huggingface_hub / httpx2 failures into one-line DownloadErrors."""
    host = _host(endpoint)
    try:
        yield
    except (DownloadError, Cancelled):
        raise
    except GatedRepoError:
        raise DownloadError(
            f"{repo_id} is gated: accept its terms on the Hub and log in (HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise DownloadError(
            f"repository {repo_id} not found on {host} "
            "(check the name; private repositories need a token)"
        ) from None
    except RevisionNotFoundError:
        raise DownloadError(f"revision {revision} not found in {repo_id}") from None
    except EntryNotFoundError:
        what = filename or "the file"
        raise DownloadError(f"{what} not found in {repo_id} at revision {revision}") from None
    except OfflineModeIsEnabled:
        raise DownloadError(
            "Hugging Face offline mode is on (HF_HUB_OFFLINE is set); unset it to download"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "error"
        raise DownloadError(f"{host} answered HTTP {status} for {repo_id}") from None
    except httpx2.TimeoutException:
        raise DownloadError(f"network failure: timed out talking to {host}") from None
    except httpx2.HTTPError as exc:
        detail = _one_line(str(exc) or type(exc).__name__, 80)
        raise DownloadError(f"network failure: cannot reach {host} ({detail})") from None
    except HFValidationError:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)") from None
    except ValueError as exc:  # a JSON body that is not what the Hub sends
        raise DownloadError(f"unexpected answer from {host}: {_one_line(str(exc), 80)}") from None


def _check_repo_id(repo_id: str) -> None:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)") from None
    if "/" not in repo_id:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)")


def _is_gguf_name(name: str) -> bool:
    return name.lower().endswith(".gguf")


def list_gguf_files(
    repo_id: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> list[RemoteFile]:
    """Every GGUF file in the repository (all folders), with size and LFS sha256."""
    _check_repo_id(repo_id)
    ep = resolve_endpoint(endpoint)
    api = HfApi(endpoint=ep, token=token)
    with _hub_errors(repo_id, ep, revision=revision):
        items = list(api.list_repo_tree(repo_id, recursive=True, revision=revision))
    files = []
    for item in items:
        if isinstance(item, RepoFile) and _is_gguf_name(item.path):
            size = int(item.lfs.size) if item.lfs is not None else int(item.size)
            sha = str(item.lfs.sha256).lower() if item.lfs is not None else None
            files.append(RemoteFile(item.path, size, sha))
    return sorted(files, key=lambda f: f.path)


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
            shown.append(f"{f.path} ({_size(f.size)})")
        else:
            total = sum(x.size for x in all_files if _shard_key(x) == key)
            shown.append(f"{f.path} ({_size(total)} in {key[1]} parts)")
    more = len(files) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def select_file(
    files: Sequence[RemoteFile], pattern: str | None = None, *, repo_id: str = "the repository"
) -> RemoteFile:
    """Pick one file: exact path or name, else glob, else case-insensitive substring.

    A split model matches as one file (its first part is returned; `pull` fetches every part).
    """
    if not files:
        raise DownloadError(f"{repo_id} has no GGUF files")
    logical = _logical(files)
    if pattern is None:
        matches = logical
    else:
        needle = pattern.lower()
        exact = [f for f in files if needle in (f.path.lower(), f.name.lower())]
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


def _parts_of(files: Sequence[RemoteFile], chosen: RemoteFile) -> list[RemoteFile]:
    key = _shard_key(chosen)
    if key is None:
        return [chosen]
    parts = sorted((f for f in files if _shard_key(f) == key), key=lambda f: f.path)
    numbers = [p.shard[0] for p in parts if p.shard is not None]
    if numbers != list(range(1, key[1] + 1)):
        raise DownloadError(
            f"{chosen.path} is part of a {key[1]}-part model but the repository has parts {numbers}"
        )
    return parts


def default_destination(repo_id: str) -> Path:
    """Where `pull` puts a repository's files: <models_dir>/<owner>/<name>/."""
    owner, _, name = repo_id.partition("/")
    return models_dir() / owner / name


def _safe_name(filename: str) -> str:
    pure = PurePosixPath(filename)
    if pure.is_absolute() or ".." in pure.parts or not pure.name:
        raise DownloadError(f"refusing odd file name {filename!r}")
    return pure.name


def partial_path(dest: Path, content_id: str) -> Path:
    """The hidden in-progress file for `dest` (never ends in .gguf, so never listed)."""
    safe_id = re.sub(r"[^0-9A-Za-z]", "", content_id)[:16] or "unknown"
    return dest.with_name(f".{dest.name}.{safe_id}.incomplete")


def _is_cancelled(cancel: CancelFlag | None) -> bool:
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())


def _sha256_of(
    path: Path, size: int, name: str, progress: ProgressCallback | None, cancel: CancelFlag | None
) -> Any:
    hasher = hashlib.sha256()
    done = 0
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            if _is_cancelled(cancel):
                raise Cancelled(f"download of {name} cancelled")
            hasher.update(block)
            done += len(block)
            if progress is not None:
                progress(DownloadProgress(name, done, size, "checking"))
    return hasher


def _lock(out: IO[bytes], name: str) -> None:
    """One download per file at a time: a second one would interleave its bytes with ours."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only; elsewhere downloads are simply not locked
    except ImportError:
        return
    try:
        fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DownloadError(f"{name} is already being downloaded by another process") from None


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _no_space(directory: Path, exc: OSError, partial: Path) -> DownloadError:
    with contextlib.suppress(OSError):
        partial.unlink()
    detail = "file size limit reached" if exc.errno == errno.EFBIG else "disk is full"
    return DownloadError(
        f"not enough disk space in {directory} ({detail}); the partial download was removed"
    )


def _resolve_meta(
    repo_id: str, filename: str, revision: str, ep: str, token: str | bool | None
) -> tuple[str, int | None, str | None]:
    """(commit, size, sha256-or-None) from a HEAD request on the file's resolve URL."""
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=ep)
    with _hub_errors(repo_id, ep, revision=revision, filename=filename):
        meta = get_hf_file_metadata(url, token=token, endpoint=ep)
    etag = (meta.etag or "").strip('"').lower()
    sha = etag if _SHA256_RE.match(etag) else None  # an LFS file's ETag is its sha256
    return meta.commit_hash or revision, meta.size, sha


def download_file(
    repo_id: str,
    file: str | RemoteFile,
    *,
    revision: str = "main",
    dest_dir: str | os.PathLike[str] | None = None,
    endpoint: str | None = None,
    token: str | bool | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelFlag | None = None,
    retries: int = 3,
    progress_every: int = PROGRESS_EVERY,
) -> Path:
    """Download one file into `dest_dir` (default `default_destination(repo_id)`); return its path.

    Resumes a partial file left by an earlier attempt. Raises DownloadError or Cancelled.
    """
    _check_repo_id(repo_id)
    ep = resolve_endpoint(endpoint)
    remote = file if isinstance(file, RemoteFile) else None
    filename = remote.path if remote is not None else str(file)
    name = _safe_name(filename)
    directory = Path(dest_dir) if dest_dir is not None else default_destination(repo_id)
    dest = directory / name

    commit, head_size, head_sha = _resolve_meta(repo_id, filename, revision, ep, token)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"cannot create {directory}: {exc.strerror or exc}") from None
    size = remote.size if remote is not None else head_size
    sha = (remote.sha256 if remote is not None else None) or head_sha
    content_id = sha or commit

    if (
        dest.exists()
        and size is not None
        and dest.stat().st_size == size
        and (sha is None or _sha256_of(dest, size, name, progress, cancel).hexdigest() == sha)
    ):
        if progress is not None:
            progress(DownloadProgress(name, size, size, "done"))
        return dest

    partial = partial_path(dest, content_id)
    for stale in directory.glob(f".{dest.name}.*.incomplete"):
        if stale != partial:
            with contextlib.suppress(OSError):
                stale.unlink()

    attempt = 0
    try:
        with partial.open("ab") as out:
            _lock(out, name)
            have = os.fstat(out.fileno()).st_size
            if size is not None and have > size:
                out.truncate(0)
                have = 0
            if size is not None:
                free = shutil.disk_usage(directory).free
                if size - have > free:
                    if have == 0:
                        partial.unlink(missing_ok=True)
                    raise DownloadError(
                        f"not enough disk space in {directory}: {name} needs "
                        f"{_mib(size - have)} more, {_mib(free)} free"
                    )
            state = _Transfer(
                url=hf_hub_url(repo_id, filename, revision=commit, endpoint=ep),
                name=name,
                size=size,
                have=have,
                hasher=_sha256_of(partial, have, name, progress, cancel)
                if have
                else hashlib.sha256(),
                resumed_from=have,
                progress=progress,
                cancel=cancel,
                report_every=max(progress_every, 1),
            )
            while True:
                try:
                    state.run(out, token, _hub_errors(repo_id, ep, revision=commit, filename=name))
                    break
                except (httpx2.TransportError, httpx2.StreamError) as exc:
                    out.flush()
                    if attempt >= retries:
                        detail = _one_line(str(exc) or type(exc).__name__, 80)
                        raise DownloadError(
                            f"network failure while downloading {name} from {_host(ep)} "
                            f"({detail}); {_mib(state.have)} kept, pull again to resume"
                        ) from None
                    time.sleep(min(0.5 * 2**attempt, 5.0))
                    attempt += 1
            out.flush()
            os.fsync(out.fileno())
    except _BadTransferError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(str(exc)) from None
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise _no_space(directory, exc, partial) from None
        raise DownloadError(
            f"cannot write {partial}: {exc.strerror or _one_line(str(exc), 80)}"
        ) from None

    if size is not None and state.have != size:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"{name} arrived with {state.have} bytes but the Hub reported {size}; "
            "the download was deleted"
        )
    digest = state.hasher.hexdigest()
    if sha is not None and digest != sha:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"checksum mismatch for {name}: expected sha256 {sha[:12]}…, got {digest[:12]}…; "
            "the download was deleted"
        )
    os.replace(partial, dest)
    _fsync_dir(directory)
    if progress is not None:
        progress(DownloadProgress(name, state.have, size, "done", state.resumed_from))
    return dest


@dataclass
class _Transfer:
    """Bytes so far of one file, and the GET that continues it from there."""

    url: str
    name: str
    size: int | None
    have: int
    hasher: Any
    resumed_from: int
    progress: ProgressCallback | None
    cancel: CancelFlag | None
    report_every: int

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(
                DownloadProgress(self.name, self.have, self.size, "downloading", self.resumed_from)
            )

    def run(
        self,
        out: IO[bytes],
        token: str | bool | None,
        errors: contextlib.AbstractContextManager[None],
    ) -> None:
        """One GET (ranged from `have`), appended to `out` piece by piece as bytes arrive."""
        if self.size is not None and self.have == self.size:
            return
        headers = build_hf_headers(token=token)
        headers["Accept-Encoding"] = "identity"
        if self.have:
            headers["Range"] = f"bytes={self.have}-"
        with get_session().stream("GET", self.url, headers=headers, timeout=_TIMEOUT) as response:
            if response.status_code == 416:
                raise _BadTransferError(
                    f"the server refused to resume {self.name}; the partial download was "
                    "deleted, pull again to start over"
                )
            with errors:
                hf_raise_for_status(response)
            start = 0
            if response.status_code == 206:
                match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
                start = int(match.group(1)) if match else -1
            if start != self.have:  # the server ignored or misread our Range: start over
                out.seek(0)
                out.truncate()
                self.have = 0
                self.hasher = hashlib.sha256()
            self._report()
            last_report = self.have
            # No chunk_size: write what arrives, so a dropped connection loses nothing received.
            for piece in response.iter_bytes():
                if _is_cancelled(self.cancel):
                    out.flush()
                    raise Cancelled(
                        f"download of {self.name} cancelled; {_mib(self.have)} kept to resume"
                    )
                if not piece:
                    continue
                if self.size is not None and self.have + len(piece) > self.size:
                    raise _BadTransferError(
                        f"{self.name}: the server sent more than the {self.size} bytes the Hub "
                        "reported; the download was deleted"
                    )
                out.write(piece)
                self.hasher.update(piece)
                self.have += len(piece)
                if self.have - last_report >= self.report_every:
                    last_report = self.have
                    self._report()
            if self.have != last_report:
                self._report()


def pull(
    repo_id: str,
    pattern: str | None = None,
    *,
    revision: str = "main",
    dest_dir: str | os.PathLike[str] | None = None,
    endpoint: str | None = None,
    token: str | bool | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelFlag | None = None,
    retries: int = 3,
) -> list[Path]:
    """List, choose and download one model (all parts of a split one). First part first."""
    files = list_gguf_files(repo_id, revision=revision, endpoint=endpoint, token=token)
    chosen = select_file(files, pattern, repo_id=repo_id)
    return [
        download_file(
            repo_id,
            part,
            revision=revision,
            dest_dir=dest_dir,
            endpoint=endpoint,
            token=token,
            progress=progress,
            cancel=cancel,
            retries=retries,
        )
        for part in _parts_of(files, chosen)
    ]
