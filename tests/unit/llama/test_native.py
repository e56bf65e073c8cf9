"""The private llama-cpp-python names app/llama/native.py relies on are still there and still
what it takes them for: loaded libraries exporting the ggml symbols the backend and RPC bind."""

from __future__ import annotations

import ctypes
import importlib

from app.llama import native
from app.llama.backend import ensure_backend


def test_libllama_is_the_bindings_own_handle_and_exports_the_backend_loader() -> None:
    bindings = importlib.import_module("llama_cpp.llama_cpp")
    lib = native.libllama()
    assert isinstance(lib, ctypes.CDLL)
    assert lib is bindings._lib
    # Resolved through libllama: the libggml it is linked to (app/llama/backend.py).
    for symbol in (
        "llama_backend_init",
        "ggml_backend_reg_count",
        "ggml_backend_load_all_from_path",
    ):
        assert hasattr(lib, symbol), symbol


def test_libggml_is_the_packages_ggml_handle_and_exports_the_device_registry() -> None:
    lib = native.libggml()
    assert isinstance(lib, ctypes.CDLL)
    assert lib is importlib.import_module("llama_cpp._ggml").libggml
    for symbol in (
        "ggml_backend_reg_by_name",
        "ggml_backend_reg_get_proc_address",
        "ggml_backend_dev_count",
        "ggml_backend_dev_get",
        "ggml_backend_dev_by_name",
    ):
        assert hasattr(lib, symbol), symbol


def test_the_library_dir_holds_the_packages_shared_libraries() -> None:
    names = [path.name for path in native.library_dir().iterdir()]
    assert any(name.startswith("libllama") or name.startswith("llama") for name in names), names
    assert any("ggml" in name for name in names), names


def test_a_local_gpu_is_a_gpu_kind_not_named_as_a_workers() -> None:
    assert native.is_local_gpu("gpu", "CUDA0")
    assert native.is_local_gpu("igpu", "Vulkan0")
    assert not native.is_local_gpu("gpu", "RPC0")  # a worker's GPU is not this machine's
    assert not native.is_local_gpu("cpu", "CPU")
    assert not native.is_local_gpu("accel", "BLAS")


def test_the_device_functions_count_the_cpu_among_the_devices() -> None:
    ensure_backend()
    lib = native.device_functions()
    count = int(lib.ggml_backend_dev_count())
    names = [
        (lib.ggml_backend_dev_name(lib.ggml_backend_dev_get(i)) or b"").decode()
        for i in range(count)
    ]
    assert "CPU" in names, names
