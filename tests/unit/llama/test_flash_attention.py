"""Flash attention is kept off where every weight is in host memory (app/llama/facts.py)."""

from __future__ import annotations

from app.llama.facts import held_on_host

_MIB = 1 << 20


def test_weights_mapped_in_host_memory_run_attention_on_the_cpu() -> None:
    assert held_on_host((("CPU_Mapped", 500 * _MIB),))
    assert held_on_host((("CPU_Mapped", 400 * _MIB), ("CPU_REPACK", 100 * _MIB)))
    assert held_on_host((("AMX", 100 * _MIB), ("CPU", 10 * _MIB)))


def test_a_layer_on_a_gpu_or_a_worker_keeps_llama_cpps_choice() -> None:
    assert not held_on_host((("CPU_Mapped", 50 * _MIB), ("CUDA0", 450 * _MIB)))
    assert not held_on_host((("CPU_Mapped", 50 * _MIB), ("RPC0[10.0.0.2:50052]", 450 * _MIB)))
    assert not held_on_host((("Vulkan0", 500 * _MIB),))


def test_an_unknown_placement_keeps_llama_cpps_choice() -> None:
    assert not held_on_host(())
