"""Re-encode a GGUF in another quantization type with llama.cpp's own quantizer.

Used to derive the demo target (F32) and drafts (Q8_0, Q4_0, Q2_K) from the one bundled file,
and by "make a draft from a target". Output is written to a temporary name and renamed into
place, so an interrupted run never leaves a half-written model where discovery would list it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from app.errors import InvalidSettingError, ModelLoadError

# llama.cpp's enum llama_ftype (include/llama.h); the numbers are its ABI.
FTYPES: dict[str, int] = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q2_K": 10,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "BF16": 32,
}


def quantize_gguf(src: Path, dst: Path, type_name: str, *, threads: int | None = None) -> Path:
    """Write `src` re-encoded as `type_name` to `dst` and return `dst`."""
    ftype = FTYPES.get(type_name.upper())
    if ftype is None:
        raise InvalidSettingError(
            f"unknown quantization type {type_name!r}; choose one of {', '.join(FTYPES)}"
        )
    src = Path(src)
    dst = Path(dst)
    if not src.is_file():
        raise ModelLoadError(str(src), "no such file")
    import llama_cpp  # noqa: PLC0415 - heavy native import, only when quantizing

    from app.llama.model import ensure_backend  # noqa: PLC0415

    ensure_backend()  # routes llama.cpp's per-tensor chatter into logging

    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(dst.name + ".partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads or os.cpu_count() or 1
    # The bundled demo file is already quantized (Q4_1); llama.cpp refuses to re-quantize
    # without this flag.
    params.allow_requantize = True
    try:
        rc = llama_cpp.llama_model_quantize(
            str(src).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if rc != 0:
            raise ModelLoadError(str(src), f"llama.cpp could not quantize it to {type_name}")
        os.replace(partial, dst)
    finally:
        partial.unlink(missing_ok=True)
    return dst
