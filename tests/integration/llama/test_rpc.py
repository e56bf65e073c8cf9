"""Models on llama.cpp RPC workers (`specchat worker` subprocesses on 127.0.0.1) decode exactly
as they do locally, and the workers do the work. The workers are keyed, so every test here but
the --insecure-plain one runs through the TLS tunnel."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent
from app.engine.gamma import OFF, fixed
from app.engine.isolated import IsolatedRuntime, probe_workers
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.llama import rpc
from app.llama.config import ModelConfig
from models.compat import check_draft_file
from tests.helpers.engine import loaded_runtime
from tests.helpers.rpc_workers import REPO, Worker, running_worker

PROMPT = "The three primary colours are"
CONFIG = GenerationConfig(max_tokens=24, gamma=fixed(4), exact=True)
# One token of the F32 135M target is tens of millions of multiply-adds on the worker; 24 of them
# cost well over this much CPU time, while merely holding a connection costs almost none.
MIN_WORKER_CPU_S = 0.2

pytestmark = pytest.mark.model


def _generate(runtime: Runtime | IsolatedRuntime, *, speculative: bool) -> GenerationResult:
    config = CONFIG if speculative else replace(CONFIG, gamma=OFF)
    events = list(runtime.generate(runtime.text_prompt(PROMPT), config))
    last = events[-1]
    assert isinstance(last, FinishEvent)
    return last.result


@pytest.fixture(scope="module")
def target(demo_models: Any) -> ModelConfig:
    return ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=1)


@pytest.fixture(scope="module")
def draft(demo_models: Any) -> ModelConfig:
    return ModelConfig(str(demo_models.q4_1), n_ctx=256, n_threads=1)


@pytest.fixture(scope="module")
def local_replies(target: ModelConfig, draft: ModelConfig) -> dict[str, list[int]]:
    with loaded_runtime(target, draft) as runtime:
        return {
            "plain": _generate(runtime, speculative=False).token_ids,
            "speculative": _generate(runtime, speculative=True).token_ids,
        }


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    assert rpc.supports_rpc(), f"llama.cpp was built without RPC: {rpc.REBUILD_COMMAND}"
    with running_worker() as first, running_worker() as second:
        yield [first, second]


def _remote_runtime(
    target: ModelConfig, endpoints: tuple[str, ...], draft: ModelConfig | None = None
) -> IsolatedRuntime:
    runtime = IsolatedRuntime(vet_draft=check_draft_file)
    runtime.load_target(replace(target, rpc_servers=endpoints))
    if draft is not None:
        runtime.load_draft(draft)
    return runtime


def _remote_bytes(placement: tuple[tuple[str, int], ...], endpoint: str) -> int:
    return sum(size for name, size in placement if name.startswith("RPC") and endpoint in name)


def test_plain_greedy_through_one_worker_matches_local_and_runs_there(
    target: ModelConfig, local_replies: dict[str, list[int]], workers: list[Worker]
) -> None:
    worker = workers[0]
    runtime = _remote_runtime(target, (worker.endpoint,))
    try:
        assert runtime.target is not None and runtime.target.path == target.path
        before = worker.cpu_seconds()
        result = _generate(runtime, speculative=False)
        worker_cpu = worker.cpu_seconds() - before
    finally:
        runtime.close()
    assert result.token_ids == local_replies["plain"]
    assert worker_cpu > MIN_WORKER_CPU_S


def test_speculative_with_local_draft_through_one_worker_matches_local(
    target: ModelConfig,
    draft: ModelConfig,
    local_replies: dict[str, list[int]],
    workers: list[Worker],
) -> None:
    worker = workers[0]
    runtime = _remote_runtime(target, (worker.endpoint,), draft)
    try:
        assert runtime.mode == "hybrid"  # the draft model and the suffix index draft together
        before = worker.cpu_seconds()
        result = _generate(runtime, speculative=True)
        worker_cpu = worker.cpu_seconds() - before
    finally:
        runtime.close()
    assert result.token_ids == local_replies["speculative"]
    assert result.stats.drafted > 0  # it really speculated
    assert worker_cpu > MIN_WORKER_CPU_S


def test_a_plain_worker_serves_llama_cpp_unencrypted_as_before(
    target: ModelConfig, local_replies: dict[str, list[int]]
) -> None:
    with running_worker(plain=True) as worker:
        runtime = _remote_runtime(target, (worker.endpoint,))
        try:
            before = worker.cpu_seconds()
            result = _generate(runtime, speculative=False)
            worker_cpu = worker.cpu_seconds() - before
        finally:
            runtime.close()
    assert result.token_ids == local_replies["plain"]
    assert worker_cpu > MIN_WORKER_CPU_S


def test_draft_without_draft_rpc_stays_local_while_the_target_is_remote(
    target: ModelConfig, draft: ModelConfig, workers: list[Worker]
) -> None:
    runtime = IsolatedRuntime(vet_draft=check_draft_file)
    try:
        target_facts = runtime.load_target(replace(target, rpc_servers=(workers[0].endpoint,)))
        draft_facts = runtime.load_draft(draft)
    finally:
        runtime.close()
    assert _remote_bytes(target_facts.placement, workers[0].endpoint) > 0
    assert draft_facts.placement, "llama.cpp reported where the draft went"
    assert all(not name.startswith("RPC") for name, _ in draft_facts.placement)


def test_two_workers_split_the_layers_and_both_compute(
    target: ModelConfig, local_replies: dict[str, list[int]], workers: list[Worker]
) -> None:
    endpoints = tuple(w.endpoint for w in workers)
    runtime = _remote_runtime(target, endpoints)
    try:
        before = [w.cpu_seconds() for w in workers]
        result = _generate(runtime, speculative=False)
        spent = [w.cpu_seconds() - b for w, b in zip(workers, before, strict=True)]
        memory = runtime.worker_memory()
    finally:
        runtime.close()
    assert result.token_ids == local_replies["plain"]
    assert all(cpu > MIN_WORKER_CPU_S / 2 for cpu in spent), spent
    assert {m.endpoint for m in memory} == set(endpoints)
    assert all(0 < m.free_bytes <= m.total_bytes for m in memory)


def test_two_workers_each_hold_part_of_the_weights(
    target: ModelConfig, workers: list[Worker]
) -> None:
    runtime = IsolatedRuntime(vet_draft=check_draft_file)
    try:
        facts = runtime.load_target(replace(target, rpc_servers=tuple(w.endpoint for w in workers)))
    finally:
        runtime.close()
    shares = [_remote_bytes(facts.placement, w.endpoint) for w in workers]
    assert all(share > 0 for share in shares), facts.placement


def test_cli_json_lists_the_devices_that_held_each_model(
    target: ModelConfig, draft: ModelConfig, workers: list[Worker]
) -> None:
    endpoint = workers[0].endpoint
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "generate",
            "--target",
            target.path,
            "--draft",
            draft.path,
            "--prompt",
            PROMPT,
            "--max-tokens",
            "8",
            "--threads",
            "1",
            "--n-ctx",
            "256",
            "--rpc",
            workers[0].spec,
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    devices = json.loads(proc.stdout)["devices"]
    target_buffers = [d["buffer"] for d in devices["target"] if d["bytes"] > 0]
    assert f"RPC0[{endpoint}]" in target_buffers
    assert devices["draft"] and all("RPC" not in d["buffer"] for d in devices["draft"])


def test_idle_workers_report_their_memory_for_the_memory_panel(workers: list[Worker]) -> None:
    found = probe_workers([w.endpoint for w in workers])
    assert [m.endpoint for m in found] == [w.endpoint for w in workers]
    assert all(m.device.startswith("RPC") and 0 < m.free_bytes <= m.total_bytes for m in found)


def test_bench_runs_its_configurations_on_a_worker(
    target: ModelConfig, workers: list[Worker], tmp_path: Path
) -> None:
    out = tmp_path / "bench.json"
    worker = workers[0]
    before = worker.cpu_seconds()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "bench",
            "--target",
            target.path,
            "--draft",
            "suffix",
            "--gamma",
            "4",
            "--prompts",
            "builtin:code",
            "--max-tokens",
            "16",
            "--threads",
            "1",
            "--n-ctx",
            "512",
            "--no-warmup",
            "--quiet",
            "--rpc",
            worker.spec,
            "--json",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert [c["label"] for c in report["configs"]] == ["suffix γ=4"]
    assert len(report["runs"]) == 2 * len(report["prompts"])  # plain and suffix, every prompt
    assert worker.cpu_seconds() - before > MIN_WORKER_CPU_S
