"""The loaded llama.cpp libraries as ctypes handles: the one place that names llama-cpp-python's
private modules.

llama-cpp-python binds the `llama_*` API in public, but keeps the libraries it loads to itself,
and has no binding for ggml's backend registry (ggml-backend.h) or its RPC backend (ggml-rpc.h):

- `llama_cpp.llama_cpp._lib`, libllama's handle. Backends built as separate libraries are loaded
  through it (app/llama/backend.py): symbols looked up there come from the very libggml that
  libllama is linked to, so the backends land in the registry libllama reads.
- `llama_cpp._ggml.libggml`, the libggml that llama-cpp-python loads for its own ggml helpers;
  device listing and the RPC backend are bound on it (app/llama/rpc.py), and `local_gpu` below
  binds the generic device functions alone (a bundle's libggml may lack the RPC ones).

Neither has a public counterpart in llama-cpp-python 0.3 (pyproject.toml pins >=0.3.36,<0.4), and
loading the libraries again by file name would repeat the package's own platform-specific search
(file suffixes, LLAMA_CPP_LIB_PATH). tests/unit/llama/test_native.py fails when a release renames
or drops either name. Every other module reaches these libraries through this one.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

__all__ = ["libggml", "libllama", "library_dir", "local_gpu"]


def libllama() -> ctypes.CDLL:
    """libllama as llama-cpp-python loaded it."""
    import llama_cpp.llama_cpp as bindings  # noqa: PLC0415 - loads llama.cpp on first use

    lib: ctypes.CDLL = bindings._lib
    return lib


# ggml_backend_dev_type values of a GPU and an integrated GPU (ggml-backend.h).
_GPU_KINDS = (1, 2)


def libggml() -> ctypes.CDLL:
    """libggml as llama-cpp-python's ggml helpers loaded it."""
    from llama_cpp import _ggml  # noqa: PLC0415 - loads libggml on first use

    lib: ctypes.CDLL = _ggml.libggml
    return lib


def library_dir() -> Path:
    """The folder inside the llama_cpp package that holds its shared libraries."""
    import llama_cpp.llama_cpp as bindings  # noqa: PLC0415

    return Path(bindings.__file__).parent / "lib"


def local_gpu() -> bool:
    """Whether llama.cpp has a GPU of this machine to put layers on (it does by default).
    Call after the backend is loaded. An RPC worker's devices are not this machine's."""
    lib = libggml()
    count, get = lib.ggml_backend_dev_count, lib.ggml_backend_dev_get
    kind, name = lib.ggml_backend_dev_type, lib.ggml_backend_dev_name
    count.argtypes, count.restype = [], ctypes.c_size_t
    get.argtypes, get.restype = [ctypes.c_size_t], ctypes.c_void_p
    kind.argtypes, kind.restype = [ctypes.c_void_p], ctypes.c_int
    name.argtypes, name.restype = [ctypes.c_void_p], ctypes.c_char_p
    for i in range(int(count())):
        device = get(i)
        if kind(device) in _GPU_KINDS and not (name(device) or b"").startswith(b"RPC"):
            return True
    return False
