"""A local stand-in for the Hugging Face Hub: a real HTTP server on 127.0.0.1, in a thread.

It speaks the part of the Hub's protocol that huggingface_hub's own client uses for listing and
downloading, so tests drive the real client over real sockets (nothing in the library is
mocked):

- `GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=...` -> JSON file list, LFS files with
  `lfs: {oid: sha256, size, pointerSize}` (the tree API);
- `GET /api/models/{repo}/revision/{rev}` -> repo info with `sha` and `siblings`;
- `HEAD` / `GET /{repo}/resolve/{rev}/{path}` -> the bytes, with `X-Repo-Commit`, `ETag`,
  `X-Linked-Etag` / `X-Linked-Size` for LFS files, `Content-Length`, `Accept-Ranges`, and
  `Range: bytes=N-` answered with 206 + `Content-Range`;
- errors as the Hub sends them: 404 with `X-Error-Code: RepoNotFound | RevisionNotFound |
  EntryNotFound`.

Faults, per file: report a wrong sha256 (checksum mismatch), cut the body after N bytes and
drop the connection (a network failure mid-transfer), go silent mid-body (a stalled network),
redirect to itself forever, or redirect to a second server on another port, as the Hub redirects
LFS downloads to its CDN. Every request is logged for assertions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class FakeFile:
    data: bytes
    lfs: bool = True
    claimed_sha256: str | None = None  # what the Hub says; default: the true sha256
    drop_after: int | None = None  # cut GET bodies after this many bytes ...
    drops_left: int = 0  # ... for this many GET requests
    via_cdn: bool = False  # /resolve answers 302 to the CDN server
    stall_at: int | None = None  # GET bodies go silent at this byte until the hub stops
    redirect_loop: bool = False  # GET /resolve answers 302 to itself, forever
    get_error: int | None = None  # GET /resolve answers this HTTP status (HEAD still succeeds)
    get_error_code: str = "ServerError"  # ... with this X-Error-Code ("GatedRepo": gated)

    @property
    def sha256(self) -> str:
        return self.claimed_sha256 or hashlib.sha256(self.data).hexdigest()

    @property
    def git_oid(self) -> str:
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, FakeFile]
    commit: str
    revisions: tuple[str, ...] = ("main",)


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    range: str | None
    server: str  # "hub" or "cdn"


@dataclass
class FakeHub:
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    requests: list[LoggedRequest] = field(default_factory=list)
    _servers: list[ThreadingHTTPServer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    listing_delay_s: float = 0.0  # how long a file list takes to start answering

    def add_repo(self, repo_id: str, files: dict[str, FakeFile]) -> FakeRepo:
        commit = hashlib.sha1(repo_id.encode()).hexdigest()
        repo = FakeRepo(files, commit, ("main", commit))
        self.repos[repo_id] = repo
        return repo

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._servers[1].server_address[1]}"

    def log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def gets(self, path_part: str) -> list[LoggedRequest]:
        return [r for r in self.requests if r.method == "GET" and path_part in r.path]

    def start(self) -> FakeHub:
        for role in ("hub", "cdn"):
            server = _Server(("127.0.0.1", 0), _Handler)
            server.hub = self  # type: ignore[attr-defined]
            server.role = role  # type: ignore[attr-defined]
            threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            ).start()
            self._servers.append(server)
        return self

    def stop(self) -> None:
        self.stopping.set()  # ends every stalled response
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def find_blob(self, sha: str) -> FakeFile | None:
        for repo in self.repos.values():
            for f in repo.files.values():
                if f.sha256 == sha or hashlib.sha256(f.data).hexdigest() == sha:
                    return f
        return None


_TREE = re.compile(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$")
_REVISION = re.compile(r"^/api/models/([^/]+/[^/]+)/revision/([^/]+)$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_BLOB = re.compile(r"^/blob/([0-9a-f]{64})$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-body (a cancelled download) is normal here, not an error.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined, no-any-return]

    @property
    def role(self) -> str:
        return self.server.role  # type: ignore[attr-defined, no-any-return]

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    # -- plumbing -------------------------------------------------------------------------

    def _send(
        self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, *, head: bool
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, *, head: bool) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "X-Error-Code": code}
        headers["X-Error-Message"] = message
        self._send(status, body, headers, head=head)

    def _json(self, payload: Any, *, head: bool) -> None:
        body = json.dumps(payload).encode()
        self._send(200, body, {"Content-Type": "application/json"}, head=head)

    # -- routes ---------------------------------------------------------------------------

    def _route(self, *, head: bool) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        self.hub.log(LoggedRequest(self.command, path, self.headers.get("Range"), self.role))
        if self.role == "cdn":
            match = _BLOB.match(path)
            blob = self.hub.find_blob(match.group(1)) if match else None
            if blob is None:
                self._error(404, "EntryNotFound", "no such blob", head=head)
                return
            self._serve_bytes(blob, {"ETag": f'"{blob.sha256}"'}, head=head)
            return
        if match := _TREE.match(path):
            self._tree(match.group(1), match.group(2), match.group(3) or "", parts.query, head)
        elif match := _REVISION.match(path):
            self._revision(match.group(1), match.group(2), head)
        elif match := _RESOLVE.match(path):
            self._resolve(match.group(1), match.group(2), match.group(3), head)
        else:
            self._error(404, "NotFound", f"no route for {path}", head=head)

    def _repo(self, repo_id: str, revision: str, *, head: bool) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head=head)
            return None
        if revision not in repo.revisions:
            self._error(404, "RevisionNotFound", "Invalid rev id", head=head)
            return None
        return repo

    def _tree(self, repo_id: str, revision: str, prefix: str, query: str, head: bool) -> None:
        repo = self._repo(repo_id, revision, head=head)
        if repo is None:
            return
        self.hub.stopping.wait(self.hub.listing_delay_s)
        recursive = parse_qs(query).get("recursive", ["False"])[0].lower() == "true"
        base = prefix.strip("/") + "/" if prefix.strip("/") else ""
        entries: list[dict[str, Any]] = []
        folders: set[str] = set()
        for name, f in sorted(repo.files.items()):
            if not name.startswith(base):
                continue
            rest = name[len(base) :]
            if "/" in rest and not recursive:
                folders.add(base + rest.split("/", 1)[0])
                continue
            if recursive:
                pieces = rest.split("/")[:-1]
                for i in range(len(pieces)):
                    folders.add(base + "/".join(pieces[: i + 1]))
            entry: dict[str, Any] = {
                "type": "file",
                "oid": f.git_oid,
                "size": len(f.data),
                "path": name,
            }
            if f.lfs:
                entry["lfs"] = {"oid": f.sha256, "size": len(f.data), "pointerSize": 134}
            entries.append(entry)
        entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in folders]
        self._json(entries, head=head)

    def _revision(self, repo_id: str, revision: str, head: bool) -> None:
        repo = self._repo(repo_id, revision, head=head)
        if repo is None:
            return
        self._json(
            {
                "id": repo_id,
                "sha": repo.commit,
                "private": False,
                "siblings": [{"rfilename": name} for name in sorted(repo.files)],
            },
            head=head,
        )

    def _resolve(self, repo_id: str, revision: str, filename: str, head: bool) -> None:
        repo = self._repo(repo_id, revision, head=head)
        if repo is None:
            return
        f = repo.files.get(filename)
        if f is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist", head=head)
            return
        headers = {"X-Repo-Commit": repo.commit}
        if f.lfs:
            headers["X-Linked-Etag"] = f'"{f.sha256}"'
            headers["X-Linked-Size"] = str(len(f.data))
            headers["ETag"] = f'"{f.sha256}"'
        else:
            headers["ETag"] = f'"{f.git_oid}"'
        if f.get_error is not None and not head:
            self._error(f.get_error, f.get_error_code, "refused", head=head)
            return
        if f.redirect_loop and not head:
            headers["Location"] = f"{self.hub.endpoint}{self.path}"
            self._send(302, b"", headers, head=head)
            return
        if f.via_cdn:
            headers["Location"] = f"{self.hub.cdn}/blob/{f.sha256}"
            self._send(302, b"", headers, head=head)
            return
        self._serve_bytes(f, headers, head=head)

    def _serve_bytes(self, f: FakeFile, headers: dict[str, str], *, head: bool) -> None:
        size = len(f.data)
        start, end = 0, size - 1
        status = 200
        requested = self.headers.get("Range")
        if requested:
            match = _RANGE.match(requested.strip())
            if match is None or int(match.group(1)) >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"}, head=head)
                return
            start = int(match.group(1))
            if match.group(2):
                end = min(int(match.group(2)), size - 1)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        body = f.data[start : end + 1]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        if f.drops_left > 0 and f.drop_after is not None:
            f.drops_left -= 1
            self.wfile.write(body[: f.drop_after])
            self.wfile.flush()
            # Drop the connection mid-body, as a failing network would.
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if f.stall_at is not None:
            self.wfile.write(body[: max(f.stall_at - start, 0)])
            self.wfile.flush()
            self.hub.stopping.wait(60)  # silent: no byte, no close, as a stalled network
            self.close_connection = True
            return
        self.wfile.write(body)


def closed_port() -> int:
    """A local port with nothing listening on it (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
