"""A malformed Hub endpoint is one error line, from --endpoint or from HF_ENDPOINT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.errors import DownloadError
from models.hub.endpoint import resolve_endpoint

REPO_ROOT = Path(__file__).resolve().parents[3]
BAD = ["http://[::1", "http://127.0.0.1:abc", "ftp://example.org"]


@pytest.mark.parametrize("url", BAD)
def test_a_malformed_endpoint_is_a_download_error(url: str) -> None:
    with pytest.raises(DownloadError, match="invalid Hub endpoint"):
        resolve_endpoint(url)


@pytest.mark.parametrize("flag", [True, False])
def test_pull_with_a_malformed_endpoint_prints_one_line(flag: bool, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_ENDPOINT"}
    argv = [sys.executable, "-m", "app.cli.main", "models", "pull", "example/one"]
    argv += ["--dest", str(tmp_path)]
    if flag:
        argv += ["--endpoint", "http://[::1"]
    else:
        env["HF_ENDPOINT"] = "http://[::1"
    result = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    # A flag the user typed is a usage error (2); the environment's is refused when used (1).
    assert result.returncode == (2 if flag else 1)
    assert result.stderr.startswith("error: invalid Hub endpoint 'http://[::1'")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bad repo"], "error: invalid repository id 'bad repo' (expected owner/name)"),
        (["example/one", "--endpoint", "ftp://hub.example"], "error: invalid Hub endpoint"),
        (["example/one", "--endpoint", "http://127.0.0.1:99999"], "error: invalid Hub endpoint"),
    ],
)
def test_pull_refuses_what_was_typed_wrong_as_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", *argv]) == 2  # before any request
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
