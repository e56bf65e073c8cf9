"""llama.cpp's extra CPU buffers are turned off on CPUs whose AMX path crashes the process,
except for draft models, whose one-token passes never take that path."""

from __future__ import annotations

from pathlib import Path

from app.llama.backend import extra_buffers_safe, one_token_buffers

_FLAGS = "flags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512_vnni"


def _cpuinfo(tmp_path: Path, flags: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: Xeon\n{flags}\n\nprocessor\t: 1\n{flags}\n")
    return str(path)


def test_a_cpu_with_amx_keeps_weights_in_plain_buffers(tmp_path: Path) -> None:
    assert not extra_buffers_safe(_cpuinfo(tmp_path, f"{_FLAGS} amx_bf16 amx_tile amx_int8"))


def test_a_cpu_without_amx_keeps_llama_cpps_repacked_buffers(tmp_path: Path) -> None:
    assert extra_buffers_safe(_cpuinfo(tmp_path, _FLAGS))


def test_no_cpu_information_keeps_llama_cpps_default(tmp_path: Path) -> None:
    assert extra_buffers_safe(str(tmp_path / "missing"))


def test_a_draft_model_in_host_memory_on_a_cpu_with_amx_gets_them_in_one_token_passes(
    tmp_path: Path,
) -> None:
    amx = _cpuinfo(tmp_path, f"{_FLAGS} amx_bf16 amx_tile amx_int8")
    assert one_token_buffers(True, True, amx)
    assert not one_token_buffers(False, True, amx)  # a target verifies many rows a pass
    assert not one_token_buffers(True, False, amx)  # layers on a GPU or a worker read in batches


def test_without_amx_a_draft_model_keeps_reading_in_batches(tmp_path: Path) -> None:
    # The extra buffers are on for every model there, and batches read faster.
    assert not one_token_buffers(True, True, _cpuinfo(tmp_path, _FLAGS))
