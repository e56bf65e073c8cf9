"""Re-encode a GGUF in another quantization type with llama.cpp's own quantizer.

Used to derive the demo target (F32) and drafts (Q8_0, Q4_0, Q2_K) from the one bundled file,
and by "make a draft from a target". Output is written to a temporary name and renamed into
place, so an interrupted run never leaves a half-written model where discovery would list it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from app.durable import replace_atomically
from app.errors import NO_SUCH_FILE, InvalidSettingError, ModelLoadError, SpecChatError
from app.paths import DataFolderError, data_dir
from models.gguf.info import GGUFInfo
from models.partial import partial_path, remove_stale_partials

BytesWritten = Callable[[int], None]
"""Called now and then with the bytes written so far while a file is being quantized."""

# How often the size of the file being written is polled for progress.
_POLL_S = 0.25
# Less free space than this after a failed quantize means the disk filled up.
_NEARLY_FULL = 1 << 20


class NoDiskSpaceError(SpecChatError):
    """The folder a model is being written to has not enough free space for it."""


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


def _ftype(type_name: str) -> int:
    ftype = FTYPES.get(type_name.upper())
    if ftype is None:
        raise InvalidSettingError(
            f"unknown quantization type {type_name!r}; choose one of {', '.join(FTYPES)}"
        )
    return ftype


def estimated_size(info: GGUFInfo, type_name: str) -> int:
    """About how many bytes the model `info` describes takes re-encoded as `type_name`.

    Two of llama.cpp's choices dominate a small model's size, so both are priced: the token
    embeddings (which are also the output head when tied) stay at Q8_0 in a low-bit file, and a
    k-quant (256-weight blocks) cannot split rows whose length is not a multiple of 256, so such
    rows fall back to a 4.5-bit type. Pricing every weight at the type alone put the demo's Q2_K
    at half its real size. Meant for progress bars, not for memory planning.
    """
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: PLC0415

    _ftype(type_name)

    def bytes_per_weight(name: str) -> float:
        block, type_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
        return type_bytes / block

    # Mixes (Q4_K_M, ...) are priced as their base k-quant.
    base = type_name.upper().removesuffix("_S").removesuffix("_M").removesuffix("_L")
    width = info.n_embd or 0
    embedding = min(info.vocab_size * width, info.parameter_count)
    embedding_type = base if bytes_per_weight(base) >= bytes_per_weight("Q8_0") else "Q8_0"
    block, _ = GGML_QUANT_SIZES[GGMLQuantizationType[base]]
    body_type = "Q4_0" if width % block else base
    return round(
        embedding * bytes_per_weight(embedding_type)
        + (info.parameter_count - embedding) * bytes_per_weight(body_type)
    )


def quantize_gguf(
    src: Path,
    dst: Path,
    type_name: str,
    *,
    threads: int | None = None,
    written: BytesWritten | None = None,
) -> Path:
    """Write `src` re-encoded as `type_name` to `dst` and return `dst`.

    `written`, if given, is called on this thread with 0 once writing starts, every fraction
    of a second with the bytes written so far, and once with the final size.
    """
    ftype = _ftype(type_name)
    src = Path(src)
    dst = Path(dst)
    if not src.is_file():
        raise ModelLoadError(str(src), NO_SUCH_FILE)
    partial = partial_path(dst)
    _claim(partial)

    def write(into: Path) -> None:
        need = _check_space(src, dst, type_name)
        if written:
            # Only now: a file refused up front (read-only, no space) was never being written.
            written(0)
        import llama_cpp  # noqa: PLC0415 - heavy native import, only when quantizing

        from app.llama.backend import ensure_backend  # noqa: PLC0415

        ensure_backend()  # routes llama.cpp's per-tensor chatter into logging

        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = threads or os.cpu_count() or 1
        # The bundled demo file is already quantized (Q4_1); llama.cpp refuses to re-quantize
        # without this flag.
        params.allow_requantize = True
        rc = _run_watched(
            lambda: int(
                llama_cpp.llama_model_quantize(
                    os.fsencode(src), os.fsencode(into), ctypes.byref(params)
                )
            ),
            into,
            written,
        )
        if rc != 0:
            _raise_if_disk_full(dst.parent, need, into)
            raise ModelLoadError(str(src), f"llama.cpp could not quantize it to {type_name}")

    # Renamed into place whole and synced; on any failure the partial file goes and the error
    # (a folder that turned read-only mid-way) is raised as it came.
    replace_atomically(dst, write, temporary=partial)
    if written:
        written(dst.stat().st_size)
    return dst


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _claim(partial: Path) -> None:
    """Create the (empty) file llama.cpp will write, so a folder it cannot write in is refused
    in words, before anything is read: llama.cpp only says the quantize failed, which reads as
    the model's fault. Checked before the free space, which a full read-only disk would
    otherwise be blamed on."""
    folder = partial.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        remove_stale_partials(folder)
        # The name is this process's and thread's alone: a leftover of its own is replaced.
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if folder.resolve().is_relative_to(data_dir().resolve()):
            raise DataFolderError(folder, reason) from None
        # `models make-draft --out` elsewhere: not the data folder, but as plainly refused.
        raise SpecChatError(f"cannot write in {folder}: {reason}") from None


def _check_space(src: Path, dst: Path, type_name: str) -> int:
    """Refuse before writing anything when the estimate does not fit; return the estimate."""
    from models.gguf import inspect_gguf  # noqa: PLC0415

    need = estimated_size(inspect_gguf(src), type_name)
    free = shutil.disk_usage(dst.parent).free
    if need > free:
        raise NoDiskSpaceError(
            f"not enough disk space in {dst.parent}: a {type_name.upper()} file needs about "
            f"{_mib(need)}, {_mib(free)} free"
        )
    return need


def _raise_if_disk_full(folder: Path, need: int, partial: Path) -> None:
    """A quantize that failed with the disk (nearly) full ran out of space: say so, rather than
    blame the source model."""
    try:
        free = shutil.disk_usage(folder).free
        have = partial.stat().st_size if partial.exists() else 0
    except OSError:
        return
    if free < max(need - have, _NEARLY_FULL):
        raise NoDiskSpaceError(
            f"not enough disk space in {folder}: the disk filled up while writing "
            f"({_mib(have)} of about {_mib(need)} written); the partial file was removed"
        )


def _run_watched(quantize: Callable[[], int], partial: Path, written: BytesWritten | None) -> int:
    """Run `quantize`; while it runs, report the growing size of `partial` to `written`.

    The quantizer runs on a helper thread (ctypes releases the GIL) while this thread waits:
    it has no progress callback of its own, so this thread watches the file grow; and a
    signal handler (the CLI's Ctrl+C) runs on the main thread, where it can raise. On the
    quantizer's own thread it would raise inside llama.cpp's log callback, where ctypes
    swallows it and the quantize carries on to the end.

    A signal raised while waiting is passed on at once, without waiting for the quantizer,
    which cannot be stopped and goes on writing into the partial file (removed by the caller,
    so nothing is left): the process must then end with os._exit (see models.cli), because an
    ordinary interpreter exit would tear down llama.cpp's state under that thread.
    """
    outcome: list[int | BaseException] = []

    def work() -> None:
        try:
            outcome.append(quantize())
        except BaseException as exc:  # handed back to the caller's thread below
            outcome.append(exc)

    worker = threading.Thread(target=work, name="quantize", daemon=True)
    worker.start()
    while True:
        worker.join(_POLL_S)  # a signal raises here and is passed on (see above)
        if not worker.is_alive():
            break
        if written is not None:
            _report(worker, partial, written)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _report(worker: threading.Thread, partial: Path, written: BytesWritten) -> None:
    try:
        size = partial.stat().st_size
    except FileNotFoundError:
        size = 0
    try:
        written(size)
    except BaseException:
        # `written` raised (a cancel): llama.cpp's quantizer cannot be interrupted, so let it
        # finish this file before its output is thrown away; a native thread still writing
        # while the process exits could crash it.
        worker.join()
        raise
