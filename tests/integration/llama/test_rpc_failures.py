"""A worker that cannot be reached, is not a worker, speaks another version, or dies mid-reply
gives one typed error in words: never a crash of this process, never a hang, and the reply so
far is kept. llama.cpp itself aborts its process in each of these cases; these tests show the
child process around the engine contains that.

Waits are bounded (a hung test fails instead of blocking the suite); the connect and handshake
timeouts behind them are app.llama.rpc.CONNECT_TIMEOUT_S and app.engine.isolated's
HANDSHAKE_TIMEOUT_S, which bound each error to well under 10 s on an idle machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import OFF
from app.engine.isolated import IsolatedRuntime
from app.errors import RpcConnectError, RpcWorkerLostError
from app.llama import rpc_keys
from app.llama.config import ModelConfig
from app.llama.rpc_keys import PLAIN
from app.llama.rpc_token import WorkerToken
from models.compat import check_draft_file
from tests.helpers.rpc_workers import REPO, Worker, fake_server, free_port, running_worker

GUARD_S = 120  # a hang fails the test after this; the errors themselves come in seconds


@pytest.fixture
def runtime() -> Iterator[IsolatedRuntime]:
    rt = IsolatedRuntime(vet_draft=check_draft_file)
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def target(demo_models: Any) -> ModelConfig:
    return ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=1)


def _load_error(runtime: IsolatedRuntime, target: ModelConfig, endpoint: str) -> RpcConnectError:
    with pytest.raises(RpcConnectError) as caught:
        runtime.load_target(replace(target, rpc_servers=(endpoint,)))
    assert caught.value.endpoint == endpoint
    assert "\n" not in str(caught.value)
    return caught.value


@pytest.mark.model
@pytest.mark.parametrize("key", [PLAIN, str(WorkerToken(bytes(16), bytes(16)))])
def test_unreachable_port_is_refused_in_words(
    runtime: IsolatedRuntime, target: ModelConfig, key: str
) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    rpc_keys.remember(endpoint, key)
    error = _load_error(runtime, target, endpoint)
    assert "connection refused" in error.reason


@pytest.mark.model
def test_a_server_answering_garbage_is_not_taken_for_a_worker(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    with fake_server("garbage") as endpoint:
        error = _load_error(runtime, target, endpoint)
    assert "not llama.cpp's RPC protocol" in error.reason


@pytest.mark.model
def test_a_server_that_never_answers_times_out_the_handshake(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    with fake_server("silent") as endpoint:
        error = _load_error(runtime, target, endpoint)
    assert "no RPC handshake within" in error.reason


@pytest.mark.model
def test_a_worker_of_another_protocol_version_is_named_as_such(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    with fake_server("old-version") as endpoint:
        error = _load_error(runtime, target, endpoint)
    assert "protocol 6.1.0" in error.reason
    assert "same SpecChat" in error.reason


@pytest.mark.model
def test_worker_killed_mid_reply_keeps_the_tokens_and_the_runtime_stays_usable(
    runtime: IsolatedRuntime, target: ModelConfig
) -> None:
    config = GenerationConfig(max_tokens=400, gamma=OFF)
    received: list[TokenEvent] = []
    with running_worker() as worker:
        runtime.load_target(replace(target, rpc_servers=(worker.endpoint,)))
        prompt = runtime.text_prompt("Once upon a time")
        with pytest.raises(RpcWorkerLostError) as caught:
            for event in runtime.generate(prompt, config):
                if isinstance(event, TokenEvent):
                    received.append(event)
                    if len(received) == 3:
                        worker.kill()
    assert len(received) >= 3
    assert "stopped answering" in str(caught.value)
    assert runtime.target is None  # the lost model is not pretended to be loaded
    # The same runtime loads a local model and answers again.
    runtime.load_target(target)
    events = list(runtime.generate(prompt, GenerationConfig(max_tokens=4, gamma=OFF)))
    assert isinstance(events[-1], FinishEvent)
    assert events[-1].result.token_ids[:3] == [e.token_id for e in received[:3]]


def _cli(args: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.model
def test_cli_prints_one_error_line_for_an_unreachable_worker(target: ModelConfig) -> None:
    proc = _cli(
        [
            "generate",
            "--target",
            target.path,
            "--prompt",
            "Hi",
            "--max-tokens",
            "4",
            "--threads",
            "1",
            "--no-spec",
            "--rpc",
            f"plain@127.0.0.1:{free_port()}",
        ]
    )
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 1
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: RPC worker 127.0.0.1:")
    assert out == ""


@pytest.mark.model
def test_cli_keeps_the_partial_reply_when_the_worker_dies(target: ModelConfig) -> None:
    with running_worker() as worker:
        proc = _cli(
            [
                "generate",
                "--target",
                target.path,
                "--prompt",
                "Once upon a time",
                "--max-tokens",
                "400",
                "--threads",
                "1",
                "--no-spec",
                "--rpc",
                worker.spec,
            ]
        )
        assert proc.stdout is not None
        first = proc.stdout.read(20)  # the reply streams: some of it arrives before the kill
        worker.kill()
        timer = threading.Timer(GUARD_S, proc.kill)
        timer.start()
        try:
            rest, err = proc.communicate()
        finally:
            timer.cancel()
    assert proc.returncode == 1
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: an RPC worker")
    assert len(first) == 20
    assert (first + rest).strip()


def _bench_on(worker: Worker, target: ModelConfig, *extra: str) -> subprocess.Popen[str]:
    """A benchmark on the worker: the suffix index at γ 4 on the two code prompts (two blocks
    of runs), 200 tokens each, long enough for a kill to land mid-run."""
    return _cli(
        [
            "bench",
            "--target",
            target.path,
            "--draft",
            "ngram",
            "--gamma",
            "4",
            "--prompts",
            "builtin:code",
            "--max-tokens",
            "200",
            "--threads",
            "1",
            "--n-ctx",
            "512",
            "--no-warmup",
            *extra,
            "--rpc",
            worker.spec,
        ]
    )


@pytest.mark.model
def test_bench_on_a_worker_that_dies_ends_with_one_error_line(target: ModelConfig) -> None:
    with running_worker() as worker:
        proc = _bench_on(worker, target)
        assert proc.stderr is not None
        first_progress = proc.stderr.readline()  # runs have started on the worker
        worker.kill()
        timer = threading.Timer(GUARD_S, proc.kill)
        timer.start()
        try:
            _, err = proc.communicate()
        finally:
            timer.cancel()
    assert first_progress.startswith("[0/")
    assert proc.returncode == 1
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: an RPC worker")
    assert not any("ggml" in line for line in lines)  # llama.cpp's abort stays in its log


@pytest.mark.model
def test_bench_keeps_the_runs_finished_before_the_worker_died(
    target: ModelConfig, tmp_path: Path
) -> None:
    out = tmp_path / "bench.json"
    with running_worker() as worker:
        proc = _bench_on(worker, target, "--json", str(out))
        assert proc.stderr is not None
        timer = threading.Timer(GUARD_S, proc.kill)
        timer.start()
        try:
            progress = []  # one line as each run starts
            while "code #2" not in (line := proc.stderr.readline()):
                assert line, "the benchmark ended before its second prompt"
                progress += [line] if line.startswith("[") else []
            worker.kill()  # every configuration has finished the first prompt
            table, err = proc.communicate()
        finally:
            timer.cancel()
    assert proc.returncode == 1
    assert "Traceback" not in err
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["interrupted"] is True
    counted = [r for r in report["runs"] if r["counted"]]
    assert len(counted) == len(progress)  # the first prompt's block, plain and the draft
    assert len({r["prompt"] for r in counted}) == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(f"stopped answering; the {len(counted)} runs completed before it are reported")
    )
    assert "plain" in table
