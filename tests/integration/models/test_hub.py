"""Hub downloads against a local HTTP server speaking the Hub's protocol (tests/helpers/fake_hub),
through huggingface_hub's real client: success, resume, 404s, checksum, cancel, full disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import Cancelled, DownloadError
from app.paths import models_dir
from models.discovery import discover_models
from models.hub import (
    DownloadProgress,
    download_file,
    list_gguf_files,
    partial_path,
    pull,
    select_file,
)
from tests.helpers.fake_hub import FakeFile, FakeHub, closed_port
from tests.helpers.model_files import write_tiny_gguf

pytestmark = pytest.mark.network

REPO = "acme/Tiny-GGUF"
REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real (tiny-vocabulary) GGUF of about 2.4 MB, so a download is several reads long."""
    path = tmp_path_factory.mktemp("payload") / "tiny.gguf"
    return write_tiny_gguf(path, tensor_elements=300_000).read_bytes()


@pytest.fixture(scope="module")
def split_parts(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A real two-part split GGUF (each part a GGUF file of its own, as gguf-split writes)."""
    first = write_tiny_gguf(tmp_path_factory.mktemp("split") / "big.gguf", split_max_tensors=2)
    return [part.read_bytes() for part in sorted(first.parent.glob("big-*-of-*.gguf"))]


@pytest.fixture()
def hub(payload: bytes, split_parts: list[bytes]) -> Iterator[FakeHub]:
    with FakeHub() as server:
        server.add_repo(
            REPO,
            {
                "tiny-q4_0.gguf": FakeFile(payload),
                "tiny-q8_0.gguf": FakeFile(payload + b"\0" * 64),
                "sub/big-Q2_K-00001-of-00002.gguf": FakeFile(split_parts[0]),
                "sub/big-Q2_K-00002-of-00002.gguf": FakeFile(split_parts[1]),
                "README.md": FakeFile(b"# tiny\n", lfs=False),
            },
        )
        yield server


def _visible_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def _scan_names() -> list[str]:
    entries = discover_models(hf_cache=models_dir() / "no-cache", lmstudio=[])
    return sorted(e.path.name for e in entries)


def test_list_and_select(hub: FakeHub, payload: bytes) -> None:
    files = list_gguf_files(REPO, endpoint=hub.endpoint)
    assert [f.path for f in files] == [
        "sub/big-Q2_K-00001-of-00002.gguf",
        "sub/big-Q2_K-00002-of-00002.gguf",
        "tiny-q4_0.gguf",
        "tiny-q8_0.gguf",
    ]
    q4 = files[2]
    assert q4.size == len(payload) and q4.sha256 is not None and len(q4.sha256) == 64
    assert select_file(files, "tiny-q4_0.gguf").path == "tiny-q4_0.gguf"  # exact
    assert select_file(files, "*Q8_0*").path == "tiny-q8_0.gguf"  # glob, any case
    assert select_file(files, "q2_k").path == "sub/big-Q2_K-00001-of-00002.gguf"  # substring
    with pytest.raises(DownloadError) as none:
        select_file(files, "q5_k", repo_id=REPO)
    assert str(none.value).startswith(f"no GGUF file in {REPO} matches 'q5_k'; available: ")
    assert "sub/big-Q2_K-00001-of-00002.gguf (" in str(none.value) and "in 2 parts" in str(
        none.value
    )
    with pytest.raises(DownloadError, match=r"'tiny' matches 2 GGUF files .*tiny-q4_0\.gguf"):
        select_file(files, "tiny", repo_id=REPO)
    with pytest.raises(DownloadError, match="has no GGUF files"):
        select_file([], None, repo_id=REPO)


def test_pull_lands_the_file_atomically_with_progress(hub: FakeHub, payload: bytes) -> None:
    events: list[DownloadProgress] = []
    paths = pull(REPO, "q4_0", endpoint=hub.endpoint, progress=events.append)
    assert paths == [models_dir() / "acme" / "Tiny-GGUF" / "tiny-q4_0.gguf"]
    assert paths[0].read_bytes() == payload
    downloaded = [e.downloaded for e in events if e.phase == "downloading"]
    assert len(downloaded) >= 3 and downloaded == sorted(downloaded)
    assert events[-1].phase == "done" and events[-1].downloaded == events[-1].total == len(payload)
    assert _visible_files(paths[0].parent) == ["tiny-q4_0.gguf"]  # no partial file left
    assert _scan_names() == ["tiny-q4_0.gguf"]
    # The client asked for the exact commit the HEAD request reported.
    commit = hub.repos[REPO].commit
    assert [r.path for r in hub.gets("tiny-q4_0")] == [f"/{REPO}/resolve/{commit}/tiny-q4_0.gguf"]
    # Pulling again finds the verified file and downloads nothing.
    assert pull(REPO, "q4_0", endpoint=hub.endpoint) == paths
    assert len(hub.gets("tiny-q4_0")) == 1


def test_hf_endpoint_is_read_at_call_time(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    assert [p.name for p in pull(REPO, "tiny-q8_0.gguf")] == ["tiny-q8_0.gguf"]


def test_split_model_pulls_every_part(hub: FakeHub, split_parts: list[bytes]) -> None:
    paths = pull(REPO, "Q2_K", endpoint=hub.endpoint)
    folder = models_dir() / "acme" / "Tiny-GGUF" / "sub"  # the repository's folder is kept
    assert paths == [
        folder / "big-Q2_K-00001-of-00002.gguf",
        folder / "big-Q2_K-00002-of-00002.gguf",
    ]
    assert [p.read_bytes() for p in paths] == split_parts


def test_interrupted_transfer_resumes_on_the_next_call(hub: FakeHub, payload: bytes) -> None:
    hub.repos[REPO].files["tiny-q4_0.gguf"] = FakeFile(payload, drop_after=1_000_000, drops_left=1)
    with pytest.raises(DownloadError) as failed:
        download_file(REPO, "tiny-q4_0.gguf", endpoint=hub.endpoint, retries=0)
    message = str(failed.value)
    assert message.startswith("network failure while downloading tiny-q4_0.gguf")
    assert "kept, pull again to resume" in message and "\n" not in message
    folder = models_dir() / "acme" / "Tiny-GGUF"
    partials = [p for p in folder.iterdir() if p.name.endswith(".incomplete")]
    assert len(partials) == 1 and partials[0].name.startswith(".tiny-q4_0.gguf.")
    kept = partials[0].stat().st_size
    assert 0 < kept <= 1_000_000
    assert _scan_names() == []  # the partial file is never listed as a model

    path = download_file(REPO, "tiny-q4_0.gguf", endpoint=hub.endpoint, retries=0)
    assert path.read_bytes() == payload
    ranges = [r.range for r in hub.gets("tiny-q4_0")]
    assert ranges == [None, f"bytes={kept}-"]
    assert _visible_files(folder) == ["tiny-q4_0.gguf"]


def test_a_dropped_connection_is_resumed_within_the_same_call(hub: FakeHub, payload: bytes) -> None:
    hub.repos[REPO].files["tiny-q4_0.gguf"] = FakeFile(payload, drop_after=700_000, drops_left=1)
    path = download_file(REPO, "tiny-q4_0.gguf", endpoint=hub.endpoint, retries=2)
    assert path.read_bytes() == payload
    ranges = [r.range for r in hub.gets("tiny-q4_0")]
    assert len(ranges) == 2 and ranges[0] is None and ranges[1] is not None


def test_missing_repository_and_file(hub: FakeHub) -> None:
    with pytest.raises(DownloadError) as repo:
        pull("acme/Nothing-Here", endpoint=hub.endpoint)
    assert str(repo.value).startswith("repository acme/Nothing-Here not found on 127.0.0.1:")
    with pytest.raises(DownloadError) as file:
        download_file(REPO, "absent.gguf", endpoint=hub.endpoint)
    assert str(file.value) == f"absent.gguf not found in {REPO} at revision main"
    with pytest.raises(DownloadError, match="revision v9 not found"):
        pull(REPO, "q4_0", revision="v9", endpoint=hub.endpoint)
    assert list(models_dir().iterdir()) == []  # not even an empty folder


def test_unreachable_hub_is_a_network_failure(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(DownloadError, match=r"^network failure: cannot reach 127\.0\.0\.1:"):
        download_file(REPO, "tiny-q4_0.gguf", endpoint=endpoint, dest_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_checksum_mismatch_deletes_the_download(hub: FakeHub, payload: bytes) -> None:
    hub.repos[REPO].files["tiny-q4_0.gguf"] = FakeFile(payload, claimed_sha256="ab" * 32)
    with pytest.raises(DownloadError) as caught:
        pull(REPO, "q4_0", endpoint=hub.endpoint)
    assert str(caught.value).startswith(
        "checksum mismatch for tiny-q4_0.gguf: expected sha256 abab"
    )
    assert "the download was deleted" in str(caught.value)
    assert _visible_files(models_dir()) == []
    assert _scan_names() == []


def test_cancel_keeps_the_partial_file_and_a_later_pull_resumes(
    hub: FakeHub, payload: bytes
) -> None:
    stop = threading.Event()

    def progress(event: DownloadProgress) -> None:
        if event.downloaded > 0:
            stop.set()

    with pytest.raises(Cancelled, match=r"download of tiny-q4_0\.gguf cancelled"):
        pull(REPO, "q4_0", endpoint=hub.endpoint, progress=progress, cancel=stop)
    folder = models_dir() / "acme" / "Tiny-GGUF"
    assert [p.name.endswith(".incomplete") for p in folder.iterdir()] == [True]
    assert _scan_names() == []
    stop.clear()
    events: list[DownloadProgress] = []
    (path,) = pull(REPO, "q4_0", endpoint=hub.endpoint, cancel=stop, progress=events.append)
    assert path.read_bytes() == payload
    assert events[-1].resumed_from > 0
    assert hub.gets("tiny-q4_0")[-1].range == f"bytes={events[-1].resumed_from}-"


def test_a_second_download_of_the_same_file_is_refused_while_one_runs(
    hub: FakeHub, payload: bytes
) -> None:
    import fcntl

    folder = models_dir() / "acme" / "Tiny-GGUF"
    folder.mkdir(parents=True)
    sha = hub.repos[REPO].files["tiny-q4_0.gguf"].sha256
    with partial_path(folder / "tiny-q4_0.gguf", sha).open("ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running download does
        with pytest.raises(DownloadError, match="already being downloaded"):
            pull(REPO, "q4_0", endpoint=hub.endpoint)
    (path,) = pull(REPO, "q4_0", endpoint=hub.endpoint)  # the lock went with the holder
    assert path.read_bytes() == payload


def test_cdn_redirect_is_followed(hub: FakeHub, payload: bytes) -> None:
    hub.repos[REPO].files["tiny-q4_0.gguf"] = FakeFile(payload, via_cdn=True)
    (path,) = pull(REPO, "q4_0", endpoint=hub.endpoint)
    assert path.read_bytes() == payload
    assert [r.server for r in hub.requests if r.method == "GET" and "blob" in r.path] == ["cdn"]


def test_cli_pull_prints_progress_and_path(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli.main import main

    assert main(["models", "pull", REPO, "--file", "q4_0", "--endpoint", hub.endpoint]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(models_dir() / "acme" / "Tiny-GGUF" / "tiny-q4_0.gguf")
    assert "done tiny-q4_0.gguf" in err
    assert main(["models", "pull", REPO, "--file", "nothing", "--endpoint", hub.endpoint]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: no GGUF file in {REPO} matches 'nothing'")
    assert err.count("\n") == 1


# --- Full disk ---------------------------------------------------------------------------------
#
# Preferred: a real 1-2 MiB tmpfs (`mount -t tmpfs`, which needs root, as on this project's CI
# machine): writes fail with ENOSPC exactly as on a full disk. Where mounting is not allowed,
# the download runs in a subprocess under RLIMIT_FSIZE (SIGXFSZ ignored), where writes past the
# limit fail with EFBIG. Nothing in the library is patched either way.

_RLIMIT_SCRIPT = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from app.errors import DownloadError
from models.hub import download_file
try:
    download_file(sys.argv[2], sys.argv[3], endpoint=sys.argv[4], dest_dir=sys.argv[5], retries=0)
    print(json.dumps({"error": None}))
except DownloadError as exc:
    print(json.dumps({"error": str(exc)}))
"""


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = False
    # SPECCHAT_TEST_FULL_DISK=rlimit forces the fallback, to exercise it where tmpfs works.
    if sys.platform == "linux" and os.environ.get("SPECCHAT_TEST_FULL_DISK") != "rlimit":
        try:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                check=True,
                capture_output=True,
                timeout=10,
            )
            mounted = True
        except (OSError, subprocess.SubprocessError):
            mounted = False
    try:
        yield mount_point, ("tmpfs" if mounted else "rlimit")
    finally:
        if mounted:
            subprocess.run(["umount", str(mount_point)], check=False, timeout=10)


def _download_on_small_disk(
    hub: FakeHub, filename: str, folder: Path, mode: str, progress: object = None
) -> str | None:
    if mode == "tmpfs":
        try:
            download_file(
                REPO,
                filename,
                endpoint=hub.endpoint,
                dest_dir=folder,
                retries=0,
                progress=progress,  # type: ignore[arg-type]
                progress_every=1,
            )
        except DownloadError as exc:
            return str(exc)
        return None
    limit = str(1024 * 1024)
    result = subprocess.run(
        [sys.executable, "-c", _RLIMIT_SCRIPT, limit, REPO, filename, hub.endpoint, str(folder)],
        cwd=REPO_ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr
    error: str | None = json.loads(result.stdout.strip().splitlines()[-1])["error"]
    return error


def test_file_larger_than_the_free_space(
    hub: FakeHub, small_disk: tuple[Path, str], payload: bytes
) -> None:
    folder, mode = small_disk
    hub.repos[REPO].files["huge.gguf"] = FakeFile(payload + payload)  # 4.8 MB > 2 MiB
    error = _download_on_small_disk(hub, "huge.gguf", folder, mode)
    assert error is not None and error.startswith(f"not enough disk space in {folder}"), mode
    assert list(folder.iterdir()) == []  # nothing half-written left behind
    assert discover_models([folder], include_app=False, include_hf_cache=False, lmstudio=[]) == []


def test_disk_filling_up_during_the_transfer(
    hub: FakeHub, small_disk: tuple[Path, str], payload: bytes
) -> None:
    folder, mode = small_disk
    # 1.2 MB: fits the 2 MiB disk when the download starts (and passes the free-space check).
    hub.repos[REPO].files["mid.gguf"] = FakeFile(payload[:1_200_000])
    filler = folder / "someone-elses-file.bin"

    def fill_the_disk(event: DownloadProgress) -> None:
        # Another program takes the rest of the disk once our download has started.
        if event.downloaded > 0 and not filler.exists():
            with filler.open("wb") as out:
                try:
                    while True:
                        out.write(b"\0" * 65536)
                        out.flush()
                except OSError:
                    pass

    error = _download_on_small_disk(hub, "mid.gguf", folder, mode, fill_the_disk)
    assert error is not None, mode
    assert error.startswith(f"not enough disk space in {folder}")
    assert error.endswith("the partial download was removed")
    assert [p.name for p in folder.iterdir() if p != filler] == []
