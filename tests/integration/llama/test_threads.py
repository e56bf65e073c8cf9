"""Thread settings: llama.cpp gets the cores other processes leave free unless the user fixed a
count, its idle threads sleep, and the contention benchmark measures what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.bench.contention import Candidate, candidates, measure
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.llama.threads import (
    HOLD_S,
    SAMPLE_EVERY_S,
    CoreGovernor,
    default_thread_count,
    physical_cores,
    read_cpu_seconds,
)

ROOT = Path(__file__).resolve().parents[3]


class Machine:
    """CPU counters and a clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.all_busy = 0.0
        self.own_busy = 0.0

    def read(self) -> tuple[float, float]:
        return self.all_busy, self.own_busy

    def clock(self) -> float:
        return self.now

    def run_for(self, seconds: float, *, others: float, own: float) -> None:
        """`others` and `own`: cores kept busy during the next `seconds`."""
        self.now += seconds
        self.all_busy += (others + own) * seconds
        self.own_busy += own * seconds


def governed(cores: int) -> tuple[CoreGovernor, Machine]:
    machine = Machine()
    governor = CoreGovernor(cores, read=machine.read, clock=machine.clock)
    assert governor.free_cores() == cores  # the first reading is only a baseline
    return governor, machine


def test_a_quiet_machine_keeps_every_core_however_busy_this_process_is() -> None:
    governor, machine = governed(4)
    machine.run_for(1.0, others=0.1, own=4.0)
    assert governor.free_cores() == 4


def test_a_competing_process_takes_a_core_away_and_gives_it_back_when_it_stops() -> None:
    governor, machine = governed(2)
    # Beside two spinning llama.cpp threads the competitor gets only part of a core: it counts,
    # once it has held that core for HOLD_S.
    machine.run_for(0.5, others=0.7, own=1.3)
    assert governor.free_cores() == 2
    machine.run_for(0.5, others=1.0, own=1.0)
    assert governor.free_cores() == 1
    machine.run_for(0.5, others=1.0, own=1.0)
    assert governor.free_cores() == 1
    machine.run_for(SAMPLE_EVERY_S, others=0.05, own=1.0)
    assert governor.free_cores() == 2


def test_a_blip_shorter_than_the_hold_takes_no_core() -> None:
    governor, machine = governed(2)
    for _ in range(5):
        machine.run_for(SAMPLE_EVERY_S, others=0.05, own=2.0)
        assert governor.free_cores() == 2
        # Another program busy for one reading, then gone: not worth halving the threads.
        machine.run_for(SAMPLE_EVERY_S, others=1.0, own=1.0)
        assert governor.free_cores() == 2
    held = int(HOLD_S / SAMPLE_EVERY_S) + 1
    for _ in range(held):
        machine.run_for(SAMPLE_EVERY_S, others=1.0, own=1.0)
    assert governor.free_cores() == 1


def test_after_the_hold_the_count_drops_only_as_far_as_the_lightest_reading_allows() -> None:
    governor, machine = governed(8)
    machine.run_for(HOLD_S / 2, others=4.0, own=4.0)
    assert governor.free_cores() == 8
    machine.run_for(HOLD_S / 2, others=2.0, own=6.0)
    assert governor.free_cores() == 6


def test_light_background_work_takes_no_core_and_at_least_one_core_stays() -> None:
    governor, machine = governed(8)
    machine.run_for(1.0, others=0.35, own=8.0)
    assert governor.free_cores() == 8
    machine.run_for(1.0, others=2.3, own=5.0)  # two cores and a third of one
    assert governor.free_cores() == 6
    machine.run_for(1.0, others=40.0, own=1.0)
    assert governor.free_cores() == 1


def test_the_counters_are_read_at_most_once_per_sampling_period() -> None:
    governor, machine = governed(2)
    machine.run_for(SAMPLE_EVERY_S / 2, others=2.0, own=0.0)
    assert governor.free_cores() == 2  # too soon: the last answer stands
    machine.run_for(HOLD_S, others=2.0, own=0.0)
    assert governor.free_cores() == 1


def test_the_system_counter_includes_this_process_so_its_own_work_can_be_taken_out() -> None:
    all_before, own_before = read_cpu_seconds()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    all_after, own_after = read_cpu_seconds()
    own = own_after - own_before
    assert own >= 0.25
    # The kernel counts in 10 ms ticks; the system-wide counter saw at least our own spinning.
    assert all_after - all_before >= own - 0.05


@pytest.mark.model
def test_the_model_runs_with_the_cores_the_governor_leaves_free(demo_models: Any) -> None:
    cores = 2
    governor, machine = governed(cores)
    config = ModelConfig(str(demo_models.q4_1), n_ctx=256)
    with LlamaModel(config, governor=governor) as model:
        lib, ctx = model._lib, model._ctx
        history = model.tokenize("The three primary colours are")
        model.feed(history, 1)
        assert model.threads == int(lib.llama_n_threads(ctx)) == cores
        machine.run_for(1.0, others=1.0, own=1.0)
        logits = model.feed([*history, 1], 1)
        assert model.threads == int(lib.llama_n_threads(ctx)) == 1
        assert int(lib.llama_n_threads_batch(ctx)) == 1
        machine.run_for(1.0, others=0.0, own=1.0)
        model.feed([*history, 1, 2], 1)
        assert model.threads == int(lib.llama_n_threads(ctx)) == cores
    # The same logits as an ungoverned model fed the same batches (a one-row pass rounds unlike
    # a batch on some CPUs): the thread count changes speed, never results.
    with LlamaModel(ModelConfig(str(demo_models.q4_1), n_ctx=256, n_threads=1)) as fixed:
        fixed.feed(history, 1)
        assert (fixed.feed([*history, 1], 1) == logits).all()


@pytest.mark.model
def test_a_thread_count_the_user_chose_is_kept_whatever_the_load(demo_models: Any) -> None:
    governor, machine = governed(4)
    config = ModelConfig(str(demo_models.q4_1), n_ctx=256, n_threads=3)
    with LlamaModel(config, governor=governor) as model:
        history = model.tokenize("The three primary colours are")
        machine.run_for(1.0, others=3.0, own=1.0)
        model.feed(history, 1)
        assert model.threads == int(model._lib.llama_n_threads(model._ctx)) == 3


_IDLE_PROBE = """
import json, os, sys, time
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
model = LlamaModel(ModelConfig(sys.argv[1], n_ctx=256, n_threads=2))
history = model.tokenize("Once upon a time")
for token in range(8):
    history.append(token + 100)
    model.feed(history, 1)
before = os.times()
time.sleep(1.5)
after = os.times()
print(json.dumps({"idle_cpu_s": (after.user + after.system) - (before.user + before.system)}))
"""


@pytest.mark.model
def test_idle_threads_sleep_after_a_reply_instead_of_spinning(demo_models: Any) -> None:
    # A fresh process: OpenMP reads its wait policy once, when llama.cpp loads. With waits
    # forced to spin, this measured a whole core (1.5 s of CPU in 1.5 s of sleep).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    proc = subprocess.run(
        [sys.executable, "-c", _IDLE_PROBE, str(demo_models.f32)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    idle_cpu_s = json.loads(proc.stdout.strip().splitlines()[-1])["idle_cpu_s"]
    assert idle_cpu_s < 0.15


def test_the_benchmark_compares_spinning_waits_with_the_default() -> None:
    chosen = candidates()
    before = chosen[0]
    assert before.threads == physical_cores() and before.env["OMP_WAIT_POLICY"] == "ACTIVE"
    default = next(c for c in chosen if c.label.startswith("default"))
    # The default row passes no --threads: the governor chooses, as for a user.
    assert default.threads is None and default.env["OMP_WAIT_POLICY"] == ""
    assert default_thread_count() == physical_cores()


def test_one_measurement_runs_the_real_cli_and_reports_a_rate(demo_models: Any) -> None:
    rate = measure(str(demo_models.f32), Candidate("one thread", 1, {}), 4)
    assert rate > 0
