"""`specchat bench --server` keeps the runs it measured when a request fails or a signal stops
it: the table and --json report them (whole blocks counted, the rest listed), the failure or
the interruption is named in one line, and the exit status says what happened."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from tests.helpers.bench_signals import signal_at_progress
from tests.integration.bench.test_bench_remote import HANG_S, serve_fake  # noqa: F401 - fixture

pytestmark = pytest.mark.network

STOPPING = "stopping after the request under way (a second signal ends at once)"


def _bench(servers: list[str], out: Path, *flags: str) -> int:
    args = [a for url in servers for a in ("--server", url)]
    prompts = ["--prompts", "builtin:chat", "--max-tokens", "8", "--no-warmup"]
    return main(["bench", *args, *prompts, "--json", str(out), *flags])


def test_a_failed_request_keeps_the_runs_before_it(
    serve_fake: Any,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ok, failing = serve_fake(), serve_fake(mode="fail-at", fail_at=2)
    out = tmp_path / "remote.json"

    code = _bench([f"ok={ok.url}", f"bad={failing.url}"], out, "--quiet")

    assert code == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "error: bad refused the request: HTTP 500: the model is on fire; "
        "the 3 runs completed before it are reported"
    ]
    assert "bad: failed on chat/" in captured.out
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["interrupted"] is False
    assert report["error"]["server"] == "bad" and report["error"]["repeat"] == 0
    # Prompt 1 on both servers, then prompt 2 on ok alone: only the whole block is counted.
    assert [(r["server"], r["counted"]) for r in report["runs"]] == [
        ("ok", True),
        ("bad", True),
        ("ok", False),
    ]
    assert report["summary"]["ok"]["all"]["runs"] == 1


def test_a_server_that_stops_answering_fails_its_request_after_timeout_and_keeps_the_runs(
    serve_fake: Any,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ok, hung = serve_fake(), serve_fake(mode="hang-at", fail_at=2)
    out = tmp_path / "remote.json"

    start = time.monotonic()
    code = _bench([f"ok={ok.url}", f"hung={hung.url}"], out, "--quiet", "--timeout", "0.5")

    assert time.monotonic() - start < HANG_S  # it did not wait for the server
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: hung at {hung.url}/v1: no answer for 0.5 s (--timeout); "
        "the 3 runs completed before it are reported"
    ]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["error"]["server"] == "hung"
    assert report["settings"]["timeout_s"] == 0.5
    assert [(r["server"], r["counted"]) for r in report["runs"]] == [
        ("ok", True),
        ("hung", True),
        ("ok", False),
    ]


def test_a_signal_stops_after_the_request_in_progress_and_keeps_the_runs(
    serve_fake: Any,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signal_at_progress(monkeypatch, 2, signal.SIGTERM)
    fake = serve_fake()
    out = tmp_path / "remote.json"

    code = _bench([fake.url], out)

    assert code == 128 + signal.SIGTERM
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        STOPPING,  # said at once: the wait for the request under way reads as no wait
        "error: interrupted; the 2 runs completed before it are reported",
    ]
    assert "interrupted: the figures cover the 2 runs" in captured.out
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["interrupted"] is True and report["error"] is None
    assert len(report["runs"]) == 2 and all(r["counted"] for r in report["runs"])


def test_a_signal_during_the_warm_up_leaves_an_earlier_report_as_it_was(
    serve_fake: Any,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signal_at_progress(monkeypatch, 0, signal.SIGTERM)
    out = tmp_path / "remote.json"
    out.write_text("an earlier run's report\n", encoding="utf-8")
    prompts = ["--prompts", "builtin:chat", "--max-tokens", "8"]

    code = main(["bench", "--server", serve_fake().url, *prompts, "--json", str(out)])

    assert code == 128 + signal.SIGTERM
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        STOPPING,
        "error: interrupted; no run had completed, so nothing is reported or written",
    ]
    assert captured.out == ""
    assert out.read_text(encoding="utf-8") == "an earlier run's report\n"
