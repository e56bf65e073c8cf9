"""A hostile or broken Hub (tests/helpers/fake_hub, 127.0.0.1 only): stalls, redirect loops, odd
file names, colliding paths, files that are not GGUF, and no network at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

import models.cli
import models.hub.transfer
from app.errors import EMPTY_FILE, NOT_GGUF, Cancelled, DownloadError
from app.paths import models_dir
from models.hub import DownloadProgress, download_file, pull, safe_repo_path
from tests.helpers.fake_hub import FakeFile, FakeHub, closed_port
from tests.helpers.model_files import write_tiny_gguf

pytestmark = pytest.mark.network

REPO = "acme/Hostile"
REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_tiny_gguf(
        tmp_path_factory.mktemp("g") / "m.gguf", tensor_elements=80_000
    ).read_bytes()


@pytest.fixture()
def hub() -> Iterator[FakeHub]:
    with FakeHub() as server:
        yield server


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_cancel_during_a_stalled_transfer_ends_the_download_promptly(
    hub: FakeHub, gguf_bytes: bytes
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes, stall_at=100_000)})
    stop = threading.Event()
    got_bytes = threading.Event()
    outcome: list[BaseException] = []

    def progress(event: DownloadProgress) -> None:
        if event.downloaded > 0:
            got_bytes.set()

    def run() -> None:
        try:
            pull(REPO, endpoint=hub.endpoint, progress=progress, cancel=stop)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert got_bytes.wait(30)
    stop.set()  # the server is silent now: nothing arrives to notice the flag with
    # Before reads polled for the flag, the call hung until the 30 s read timeout and retries.
    worker.join(10)
    assert not worker.is_alive(), "cancel was not noticed during the stall"
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    assert "kept to resume" in str(outcome[0])


def test_a_stall_that_goes_on_is_a_one_line_network_failure(
    hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models.hub.transfer, "STALL_LIMIT_S", 1.5)
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes, stall_at=50_000)})
    with pytest.raises(DownloadError) as caught:
        pull(REPO, endpoint=hub.endpoint)
    message = str(caught.value)
    assert message.startswith("network failure: 127.0.0.1:") and "sent nothing for 2 s" in message
    assert "\n" not in message and "kept, pull again to resume" in message
    # It asked again from where it was (Range) while it waited, instead of giving up at once.
    assert any(r.range == "bytes=50000-" for r in hub.gets("m.gguf"))


def test_a_redirect_loop_is_one_line(hub: FakeHub, gguf_bytes: bytes) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes, redirect_loop=True)})
    with pytest.raises(DownloadError, match=r"redirected the download of m\.gguf in a loop"):
        pull(REPO, endpoint=hub.endpoint)
    assert not any(p.suffix == ".gguf" for p in models_dir().rglob("*"))


@pytest.mark.parametrize(
    "name",
    [
        "bad\x00name.gguf",
        "esc\x1b]0;title\x07.gguf",
        "line\nbreak.gguf",
        "..\\..\\x.gguf",
        "sub\\..\\..\\x.gguf",
        "C:x.gguf",
        "C:\\Windows\\x.gguf",
        "/etc/x.gguf",
        "a/../../x.gguf",
        "CON.gguf",
        "dots.gguf.",
        "rtl\u202eplh.gguf",
    ],
)
def test_odd_file_names_are_refused_on_any_os(name: str, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="refusing odd file name") as caught:
        safe_repo_path(name)
    assert "\x00" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert "\n" not in str(caught.value)
    # download_file refuses before any network or disk access (the port is closed).
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(DownloadError, match="refusing odd file name"):
        download_file(REPO, name, endpoint=endpoint, dest_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_ordinary_repository_paths_are_kept() -> None:
    assert safe_repo_path("Q4_K_M/model-Q4_K_M.gguf") == PurePosixPath("Q4_K_M/model-Q4_K_M.gguf")
    assert safe_repo_path("model.gguf") == PurePosixPath("model.gguf")


def test_same_file_name_in_two_folders_lands_in_two_places(hub: FakeHub, gguf_bytes: bytes) -> None:
    other = gguf_bytes + b"\0" * 32
    hub.add_repo(REPO, {"Q4/model.gguf": FakeFile(gguf_bytes), "Q8/model.gguf": FakeFile(other)})
    (q4,) = pull(REPO, "Q4/model.gguf", endpoint=hub.endpoint)
    (q8,) = pull(REPO, "Q8/model.gguf", endpoint=hub.endpoint)
    assert q4 != q8
    assert q4.read_bytes() == gguf_bytes and q8.read_bytes() == other
    assert _files(models_dir() / "acme" / "Hostile") == ["Q4/model.gguf", "Q8/model.gguf"]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", EMPTY_FILE),
        (b"<html><body>Rate limited</body></html>\n" * 10, NOT_GGUF),
        (b"GGUF\x03\x00\x00\x00" + b"\xff" * 16, "metadata keys"),
    ],
)
def test_a_download_that_is_not_a_gguf_is_deleted_not_listed(
    hub: FakeHub, payload: bytes, reason: str
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(payload)})  # the checksum matches these bytes
    with pytest.raises(DownloadError) as caught:
        pull(REPO, endpoint=hub.endpoint)
    message = str(caught.value)
    assert message.startswith("m.gguf is not a usable GGUF file (") and reason in message
    assert message.endswith("; the download was deleted")
    assert _files(models_dir()) == []


_CLI = [sys.executable, "-m", "app.cli", "models", "pull"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CLI, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": ""},
    )


def test_pull_with_no_network_is_one_error_line_without_retries() -> None:
    done = _cli("acme/Anything", "--endpoint", f"http://127.0.0.1:{closed_port()}")
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: network failure: cannot reach 127.0.0.1")
    assert "Retrying" not in done.stderr


def test_cli_pull_of_a_redirect_loop_and_an_odd_name_are_one_line(
    hub: FakeHub, gguf_bytes: bytes
) -> None:
    hub.add_repo(
        REPO,
        {"loop.gguf": FakeFile(gguf_bytes, redirect_loop=True), "x\x1b[2J.gguf": FakeFile(b"x")},
    )
    for pattern, expected in (("loop", "in a loop"), ("x", "refusing odd file name")):
        done = _cli(REPO, "--file", pattern, "--endpoint", hub.endpoint)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and expected in errors[0]


def test_a_choice_among_hostile_names_lists_them_escaped(hub: FakeHub, gguf_bytes: bytes) -> None:
    hub.add_repo(REPO, {"a\x1b[2J.gguf": FakeFile(gguf_bytes), "b\x1b]0;x\x07.gguf": FakeFile(b"")})
    with pytest.raises(DownloadError) as caught:
        pull(REPO, endpoint=hub.endpoint)
    message = str(caught.value)
    assert "pick one with --file" in message
    assert "\x1b" not in message and "a\\x1b[2J.gguf" in message


def test_a_hub_slow_to_list_its_files_is_waited_for(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    # One request with no retry: it must not share the half-second read timeout that lets a
    # stalled download notice a cancel (a large repository, or a mirror, takes seconds).
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes)})
    hub.listing_delay_s = 1.5
    paths = pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path)
    assert [p.read_bytes() for p in paths] == [gguf_bytes]


def test_a_folder_where_the_file_goes_is_one_line_before_any_download(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes)})
    (tmp_path / "m.gguf").mkdir()
    with pytest.raises(DownloadError, match=r"m\.gguf is a folder"):
        pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path)
    assert _files(tmp_path) == []  # nothing fetched, no partial left


def test_a_file_of_the_users_in_dest_is_kept_unless_forced(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes)})
    mine = tmp_path / "m.gguf"
    mine.write_text("my notes")
    with pytest.raises(DownloadError, match="already exists and is not this download"):
        pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path)
    assert mine.read_text() == "my notes" and _files(tmp_path) == ["m.gguf"]
    (path,) = pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path, replace=True)
    assert path == mine and mine.read_bytes() == gguf_bytes
    # The same file again is already there: no refusal, no download.
    assert pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path) == [mine]


def test_an_older_revision_in_the_models_folder_is_replaced(
    hub: FakeHub, gguf_bytes: bytes
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes)})
    (old,) = pull(REPO, endpoint=hub.endpoint)
    newer = gguf_bytes + b"\0" * 32
    hub.add_repo(REPO, {"m.gguf": FakeFile(newer)})
    assert pull(REPO, endpoint=hub.endpoint) == [old]
    assert old.read_bytes() == newer


def test_a_download_that_cannot_be_put_in_place_is_kept_to_finish_later(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes)})
    real_replace = os.replace

    def refused(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(models.hub.transfer.os, "replace", refused)
    with pytest.raises(DownloadError) as caught:
        pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path)
    assert "cannot put the finished m.gguf in place" in str(caught.value)
    assert "Permission denied" in str(caught.value)
    (kept,) = _files(tmp_path)
    assert kept.endswith(".incomplete") and (tmp_path / kept).stat().st_size == len(gguf_bytes)
    monkeypatch.setattr(models.hub.transfer.os, "replace", real_replace)
    fetched = len(hub.gets("m.gguf"))
    assert fetched == 1
    assert pull(REPO, endpoint=hub.endpoint, dest_dir=tmp_path) == [tmp_path / "m.gguf"]
    assert len(hub.gets("m.gguf")) == fetched  # finished from what was kept
    assert _files(tmp_path) == ["m.gguf"]


def test_a_pull_interrupted_mid_file_says_what_it_keeps(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    hub.add_repo(REPO, {"m.gguf": FakeFile(gguf_bytes, stall_at=100_000)})
    command = [*_CLI, REPO, "--endpoint", hub.endpoint, "--dest", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": ""}
    proc = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".incomplete") and p.stat().st_size for p in tmp_path.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1)  # the stall: all it will send has arrived
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = err.splitlines()
    (partial,) = tmp_path.iterdir()
    kept = models.cli._bytes(partial.stat().st_size)
    assert lines[-2] == f"{kept} of m.gguf kept: the same pull resumes it", err
    assert lines[-1] == "error: interrupted"


_REFUSALS = {
    "server error": (500, "ServerError", None, "HTTP 500 for m.gguf in acme/Hostile (a server"),
    "rate limit": (429, "ServerError", None, "HTTP 429 for m.gguf in acme/Hostile (too many"),
    "gated": (403, "GatedRepo", None, "accept its terms on the Hub and log in (HF_TOKEN);"),
    "gated, token": (403, "GatedRepo", "hf_x", "accept its terms on the Hub; a token must"),
}


@pytest.mark.parametrize("case", list(_REFUSALS))
def test_a_file_the_hub_refuses_to_send_says_why_and_leaves_nothing_behind(
    hub: FakeHub, gguf_bytes: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    status, code, token, expected = _REFUSALS[case]
    if token is None:
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "no-login"))
    else:
        monkeypatch.setenv("HF_TOKEN", token)
    refused = FakeFile(gguf_bytes, get_error=status, get_error_code=code)
    hub.add_repo(REPO, {"m.gguf": refused})
    dest = tmp_path / "dest"
    with pytest.raises(DownloadError) as caught:
        pull(REPO, endpoint=hub.endpoint, dest_dir=dest)
    assert expected in str(caught.value)
    assert _files(dest) == []


def test_a_dest_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli.main import main

    in_the_way = tmp_path / "notes.gguf"
    in_the_way.write_text("mine")
    assert main(["models", "pull", REPO, "--dest", str(in_the_way)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --dest {in_the_way} is a file, not a folder")
    assert in_the_way.read_text() == "mine"
