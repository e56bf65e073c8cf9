"""One file's download: HEAD for the commit and size, then a streamed GET of that exact commit.

Progress is reported and cancellation checked per piece received, and also while the server is
silent: reads time out after half a second, so a stalled transfer notices a cancel within a
second; a stall that goes on is resumed with an HTTP Range request until it has lasted
STALL_LIMIT_S. An interrupted transfer resumes (here, after a transient drop, or on the next call).
The sha256 the Hub reports is checked, and the bytes must be a GGUF file whose header passes the
same vetting as any model file, before the file lands. The bytes go to a hidden
`.<name>.<id>.incomplete` file next to the destination and are renamed into place only when
complete and verified, so discovery never sees a partial or bogus `.gguf`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import glob
import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2
from huggingface_hub import get_hf_file_metadata, get_session, hf_hub_url, hf_raise_for_status
from huggingface_hub.utils import build_hf_headers

from app.durable import fsync_folder
from app.errors import Cancelled, DownloadError, ModelLoadError
from models.gguf.header import vet_file
from models.hub.common import (
    TIMEOUT,
    check_repo_id,
    host,
    hub_errors,
    mib,
    one_line,
    resolve_endpoint,
)
from models.hub.destination import check_destination, lock_download, no_space_error
from models.hub.listing import RemoteFile
from models.hub.names import default_destination, safe_repo_path
from models.terminal import printable

__all__ = [
    "PROGRESS_EVERY",
    "STALL_LIMIT_S",
    "CancelFlag",
    "DownloadProgress",
    "ProgressCallback",
    "download_file",
    "partial_path",
]

PROGRESS_EVERY = 256 * 1024  # bytes between two "downloading" progress reports
STALL_LIMIT_S = 30.0  # no byte for this long (across resumed requests) is a network failure
_HASH_BLOCK = 4 * 1024 * 1024
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_POLL_S = 0.1
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


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


def partial_path(dest: Path, content_id: str) -> Path:
    """The hidden in-progress file for `dest` (never ends in .gguf, so never listed)."""
    safe_id = re.sub(r"[^0-9A-Za-z]", "", content_id)[:16] or "unknown"
    return dest.with_name(f".{dest.name}.{safe_id}.incomplete")


def _wait(seconds: float, state: _Transfer) -> None:
    """Sleep between two attempts, ending early (Cancelled) when the user stops."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state.check_cancel()
        time.sleep(_POLL_S)
    state.check_cancel()


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


def _resolve_meta(
    repo_id: str, filename: str, revision: str, ep: str, token: str | bool | None
) -> tuple[str, int | None, str | None]:
    """(commit, size, sha256-or-None) from a HEAD request on the file's resolve URL."""
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=ep)
    with hub_errors(repo_id, ep, revision=revision, filename=filename):
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
    replace: bool = False,
) -> Path:
    """Download one file into `dest_dir` (default `default_destination(repo_id)`); return its path.

    Resumes a partial file left by an earlier attempt. Raises DownloadError or Cancelled.
    In a folder the user named, a file of the same name that is not this download is kept
    unless `replace`; in the default destination, which holds this repository's files only,
    it is an older revision and is replaced.
    """
    check_repo_id(repo_id)
    ep = resolve_endpoint(endpoint)
    remote = file if isinstance(file, RemoteFile) else None
    filename = remote.path if remote is not None else str(file)
    relative = safe_repo_path(filename)
    name = relative.name
    root = Path(dest_dir) if dest_dir is not None else default_destination(repo_id)
    dest = root.joinpath(*relative.parts)  # folders kept: Q4/x.gguf and Q8/x.gguf never collide
    directory = dest.parent

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
    check_destination(dest, keep_other=dest_dir is not None and not replace)

    partial = partial_path(dest, content_id)
    for stale in directory.glob(f".{glob.escape(dest.name)}.*.incomplete"):
        if stale != partial:
            with contextlib.suppress(OSError):
                stale.unlink()

    attempt = 0
    try:
        with partial.open("ab") as out:
            lock_download(out, name)
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
                        f"{mib(size - have)} more, {mib(free)} free"
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
                    state.run(out, token, hub_errors(repo_id, ep, revision=commit, filename=name))
                    break
                except httpx2.TimeoutException:
                    out.flush()
                    state.check_cancel()
                    if time.monotonic() - state.last_data < STALL_LIMIT_S:
                        continue  # a quiet server: ask again from where we are
                    raise DownloadError(
                        f"network failure: {host(ep)} sent nothing for {STALL_LIMIT_S:.0f} s "
                        f"while downloading {name}; {mib(state.have)} kept, pull again to resume"
                    ) from None
                except (httpx2.TransportError, httpx2.StreamError) as exc:
                    out.flush()
                    if attempt >= retries:
                        detail = one_line(printable(exc) or type(exc).__name__, 80)
                        raise DownloadError(
                            f"network failure while downloading {name} from {host(ep)} "
                            f"({detail}); {mib(state.have)} kept, pull again to resume"
                        ) from None
                    _wait(min(0.5 * 2**attempt, 5.0), state)
                    attempt += 1
                except httpx2.TooManyRedirects:
                    raise DownloadError(
                        f"{host(ep)} redirected the download of {name} in a loop"
                    ) from None
                except httpx2.HTTPError as exc:
                    detail = one_line(printable(exc) or type(exc).__name__, 80)
                    raise DownloadError(
                        f"cannot download {name} from {host(ep)} ({detail})"
                    ) from None
            out.flush()
            os.fsync(out.fileno())
    except _BadTransferError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(str(exc)) from None
    except DownloadError:
        # Refused before a byte came (a 404, a gated file): nothing to resume, nothing to keep.
        with contextlib.suppress(OSError):
            if partial.stat().st_size == 0:
                partial.unlink()
        raise
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise no_space_error(directory, exc, partial) from None
        raise DownloadError(
            f"cannot write {partial}: {exc.strerror or one_line(str(exc), 80)}"
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
    try:
        vet_file(partial)
    except ModelLoadError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"{name} is not a usable GGUF file ({exc.reason}); the download was deleted"
        ) from None
    try:
        os.replace(partial, dest)
    except OSError as exc:
        raise DownloadError(
            f"cannot put the finished {name} in place as {dest} "
            f"({exc.strerror or one_line(str(exc), 80)}); the download is kept, pull again "
            "to finish it without downloading"
        ) from None
    fsync_folder(directory)
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
    last_data: float = dataclasses.field(default_factory=time.monotonic)

    def check_cancel(self) -> None:
        if _is_cancelled(self.cancel):
            raise Cancelled(f"download of {self.name} cancelled; {mib(self.have)} kept to resume")

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
        with get_session().stream("GET", self.url, headers=headers, timeout=TIMEOUT) as response:
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
                    self.check_cancel()
                if not piece:
                    continue
                self.last_data = time.monotonic()
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
