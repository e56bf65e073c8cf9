"""The loaded llama.cpp libraries as ctypes handles: the one place that names llama-cpp-python's
private modules.

llama-cpp-python binds the `llama_*` API in public, but keeps the libraries it loads to itself,
and has no binding for ggml's backend registry (ggml-backend.h) or its RPC backend (ggml-rpc.h):

- `llama_cpp.llama_cpp._lib`, libllama's handle. Backends built as separate libraries are loaded
  through it (app/llama/backend.py): symbols looked up there come from the very libggml that
  libllama is linked to, so the backends land in the registry libllama reads.
- `llama_cpp._ggml.libggml`, the libggml that llama-cpp-python loads for its own ggml helpers;
  the generic device functions are bound on it here (`device_functions`, in every build), and
  the RPC backend's in app/llama/rpc.py (a bundle's libggml may lack those).

Neither has a public counterpart in llama-cpp-python 0.3 (pyproject.toml pins >=0.3.36,<0.4), and
loading the libraries again by file name would repeat the package's own platform-specific search
(file suffixes, LLAMA_CPP_LIB_PATH). tests/unit/llama/test_native.py fails when a release renames
or drops either name. Every other module reaches these libraries through this one.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEVICE_KINDS",
    "RPC_DEVICE_PREFIX",
    "bind",
    "device_functions",
    "is_local_gpu",
    "libggml",
    "libllama",
    "library_dir",
    "local_gpu",
]


def libllama() -> ctypes.CDLL:
    """libllama as llama-cpp-python loaded it."""
    import llama_cpp.llama_cpp as bindings  # noqa: PLC0415 - loads llama.cpp on first use

    lib: ctypes.CDLL = bindings._lib
    return lib


# ggml_backend_dev_type values (ggml-backend.h).
DEVICE_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
# llama.cpp names an RPC worker's devices RPC0, RPC1, ...
RPC_DEVICE_PREFIX = "RPC"

Signature = tuple[str, list[Any], Any]
_VP, _SZ = ctypes.c_void_p, ctypes.c_size_t
# The generic device functions: every build of libggml has them.
_DEVICE_FUNCTIONS: tuple[Signature, ...] = (
    ("ggml_backend_dev_count", [], _SZ),
    ("ggml_backend_dev_get", [_SZ], _VP),
    ("ggml_backend_dev_by_name", [ctypes.c_char_p], _VP),
    ("ggml_backend_dev_name", [_VP], ctypes.c_char_p),
    ("ggml_backend_dev_description", [_VP], ctypes.c_char_p),
    ("ggml_backend_dev_type", [_VP], ctypes.c_int),
    ("ggml_backend_dev_memory", [_VP, ctypes.POINTER(_SZ), ctypes.POINTER(_SZ)], None),
)


def libggml() -> ctypes.CDLL:
    """libggml as llama-cpp-python's ggml helpers loaded it."""
    from llama_cpp import _ggml  # noqa: PLC0415 - loads libggml on first use

    lib: ctypes.CDLL = _ggml.libggml
    return lib


def library_dir() -> Path:
    """The folder inside the llama_cpp package that holds its shared libraries."""
    import llama_cpp.llama_cpp as bindings  # noqa: PLC0415

    return Path(bindings.__file__).parent / "lib"


def bind(lib: ctypes.CDLL, signatures: Sequence[Signature]) -> None:
    """Set each named function's argument and result types (ctypes guesses int otherwise)."""
    for name, args, result in signatures:
        function = getattr(lib, name)
        function.argtypes = args
        function.restype = result


def device_functions() -> ctypes.CDLL:
    """libggml with its generic device functions bound. Call after the backend is loaded."""
    lib = libggml()
    bind(lib, _DEVICE_FUNCTIONS)
    return lib


def is_local_gpu(kind: str, name: str) -> bool:
    """Whether a device of this kind and llama.cpp name is a GPU of this machine."""
    return kind in {"gpu", "igpu"} and not name.startswith(RPC_DEVICE_PREFIX)


def local_gpu() -> bool:
    """Whether llama.cpp has a GPU of this machine to put layers on (it does by default).
    Call after the backend is loaded. An RPC worker's devices are not this machine's."""
    lib = device_functions()
    for i in range(int(lib.ggml_backend_dev_count())):
        device = lib.ggml_backend_dev_get(i)
        kind = DEVICE_KINDS.get(int(lib.ggml_backend_dev_type(device)), "unknown")
        if is_local_gpu(kind, (lib.ggml_backend_dev_name(device) or b"").decode()):
            return True
    return False
