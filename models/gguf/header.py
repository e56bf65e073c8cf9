"""`inspect_gguf(path)`: a file's header, read once, vetted, and cached by (path, size, mtime)
of the file and of every other part of a split model."""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from app.errors import A_FOLDER, EMPTY_FILE, NO_SUCH_FILE, NOT_GGUF, NOT_REGULAR, ModelLoadError
from app.llama.facts import GGUF_MAGIC
from models.gguf.build import build_info
from models.gguf.info import GGUFInfo
from models.gguf.layout import part_paths
from models.gguf.scan import HeaderRejectedError, HeaderScan, scan_header
from models.gguf.vetting import vet_shape

__all__ = ["clear_inspect_cache", "inspect_gguf", "vet_file"]

_SUPPORTED_VERSIONS = (2, 3)
_CACHE_LIMIT = 128


def _check_magic(path: Path, size: int) -> None:
    with path.open("rb") as handle:
        head = handle.read(8)
    if head[: len(GGUF_MAGIC)] != GGUF_MAGIC[: len(head)] or not head:
        raise ModelLoadError(str(path), NOT_GGUF)
    if len(head) < 8:
        raise ModelLoadError(str(path), f"file is truncated ({size} bytes, no complete header)")
    version = int.from_bytes(head[4:8], "little")
    swapped = int.from_bytes(head[4:8], "big")
    if version not in _SUPPORTED_VERSIONS and swapped not in _SUPPORTED_VERSIONS:
        raise ModelLoadError(str(path), f"unsupported GGUF version {version}")


def _vet(path: Path, size: int) -> HeaderScan:
    if size == 0:
        raise ModelLoadError(str(path), EMPTY_FILE)
    _check_magic(path, size)
    try:
        scan = scan_header(path, size)
        vet_shape(scan)
    except HeaderRejectedError as exc:
        raise ModelLoadError(str(path), str(exc)) from None
    return scan


def vet_file(path: str | os.PathLike[str]) -> None:
    """Raise ModelLoadError unless `path` is a regular GGUF file whose header passes the caps and
    the shape rules; bounded in time and memory, reads nothing past the header and tensor table."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise ModelLoadError(str(p), _os_reason(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(str(p), NOT_REGULAR)
    try:
        _vet(p, int(st.st_size))
    except OSError as exc:
        raise ModelLoadError(str(p), _os_reason(exc)) from None


def _read(path: Path, st: os.stat_result) -> GGUFInfo:
    return build_info(path, _vet(path, int(st.st_size)), st)


_PartStamp = tuple[int, int] | None  # (size, mtime_ns) of one other part; None when missing
_CacheKey = tuple[str, int, int, tuple[_PartStamp, ...]]
_cache: OrderedDict[_CacheKey, GGUFInfo | str] = OrderedDict()
_cache_lock = threading.Lock()


def clear_inspect_cache() -> None:
    with _cache_lock:
        _cache.clear()


def inspect_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF header. Raises ModelLoadError (and nothing else) for any unusable path."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelLoadError(str(p), NO_SUCH_FILE) from None
    except PermissionError:
        raise ModelLoadError(str(p), "permission denied") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(str(p), _os_reason(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelLoadError(str(p), A_FOLDER)
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(str(p), NOT_REGULAR)

    try:
        where = str(p.resolve())
    except (OSError, RuntimeError):
        where = str(p.absolute())
    # A split model's verdict and size depend on parts 2..N too: a part that arrives, changes
    # or goes away must be seen on the next look, not after a restart.
    key = (where, int(st.st_size), int(st.st_mtime_ns), tuple(map(_stamp, part_paths(p))))
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if isinstance(cached, GGUFInfo):
        return cached if cached.path == p else dataclasses.replace(cached, path=p)
    if isinstance(cached, str):
        raise ModelLoadError(str(p), cached)

    try:
        result: GGUFInfo | str = _read(p, st)
    except ModelLoadError as exc:
        result = exc.reason
    except PermissionError:
        result = "permission denied"
    except OSError as exc:
        result = _os_reason(exc)
    except MemoryError:
        result = "corrupt GGUF header (implausible sizes)"
    except Exception as exc:  # any parser failure on bad bytes is a corrupt file
        detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        result = f"corrupt GGUF header ({detail})"

    with _cache_lock:
        _cache[key] = result
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_LIMIT:
            _cache.popitem(last=False)
    if isinstance(result, str):
        raise ModelLoadError(str(p), result)
    return result


def _stamp(path: Path) -> _PartStamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return int(st.st_size), int(st.st_mtime_ns)


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__
