"""llama.cpp's process-wide set-up: the backends, once, and its log routed into `logging`.

The tail of the log is kept, so a failed load can say what llama.cpp complained about, and the
"model buffer" lines of the latest load tell where its weights went (app/llama/model.py).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import sys
import threading
import time

from app.llama.callbacks import native_callback
from app.llama.native import libllama, library_dir

# llama.cpp's own log lines go to this logger (debug level); readers attach handlers to it.
LLAMA_LOG_NAME = __name__
log = logging.getLogger(LLAMA_LOG_NAME)
# Set to 1 to see llama.cpp's own log on stderr: which backend library it loaded, where each
# model's weights went. Meant for diagnosing an install, the bundle's CPU variant above all.
LLAMA_LOG_ENV = "SPECCHAT_LLAMA_LOG"

_backend_lock = threading.Lock()
_backend_ready = False
recent_log_lines: list[str] = []  # the last lines llama.cpp logged
buffer_lines: list[str] = []  # "<device> model buffer size = N MiB" lines of the latest load
BUFFER_LINE = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([0-9.]+) MiB")
_log_callback: object = None  # kept referenced: llama.cpp holds the raw pointer
_decoding_thread: threading.Thread | None = None  # the thread that ran the last pass
_decoding_thread_id = 0  # its operating-system id (threading.get_native_id)
_warned_of_threads = False
# How long a thread that has ended may still be listed by the kernel (check_decoding_thread).
_THREAD_EXIT_GRACE_S = 0.05


def ensure_backend() -> None:
    """Initialise llama.cpp once and route its chatter into `logging` instead of stderr."""
    global _backend_ready, _log_callback  # noqa: PLW0603 - process-wide native state
    with _backend_lock:
        if _backend_ready:
            return
        import llama_cpp  # noqa: PLC0415

        @native_callback
        def on_log(level: int, text: bytes | None, _user: ctypes.c_void_p) -> None:
            line = (text or b"").decode("utf-8", "replace").rstrip()
            if line:
                # Keep the tail so a failed load can say what llama.cpp complained about.
                recent_log_lines.append(line)
                del recent_log_lines[:-20]
                if BUFFER_LINE.search(line):
                    buffer_lines.append(line)
                log.debug("llama.cpp[%d]: %s", level, line)

        if os.environ.get(LLAMA_LOG_ENV, "") not in ("", "0"):
            echo = logging.StreamHandler(sys.stderr)
            echo.setFormatter(logging.Formatter("%(message)s"))
            log.addHandler(echo)
            log.setLevel(logging.DEBUG)
        _log_callback = llama_cpp.llama_log_callback(on_log)
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        _load_backend_libraries()
        llama_cpp.llama_backend_init()
        _backend_ready = True


def _load_backend_libraries() -> None:
    """Load llama.cpp's backends when they are built as separate libraries.

    A portable build (GGML_BACKEND_DL, as the self-contained bundle ships) has one CPU library per
    instruction-set level and picks the best one for this CPU at load time. llama.cpp looks for
    them next to the executable and in the working directory, neither of which is where the
    Python package keeps them, so point it at the package's own lib folder. A build with the
    backends linked in has them registered already, and this does nothing.
    """
    # Looked up through libllama's handle, which finds the symbols in the very libggml that
    # libllama is linked to. llama-cpp-python's own libggml handle loads it again under another
    # file name: a second copy with a registry of its own, where loaded backends would go unseen.
    lib = libllama()
    lib.ggml_backend_reg_count.restype = ctypes.c_size_t
    if lib.ggml_backend_reg_count() == 0:
        lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        lib.ggml_backend_load_all_from_path(os.fsencode(library_dir()))


def check_decoding_thread() -> None:
    """Called before every pass: warns when one runs on a second thread of this process while
    the thread of the one before it still lives (once a process).

    llama.cpp's CPU backend keeps an OpenMP thread team per calling thread, and a team keeps
    its cores busy while its thread lives: after one pass on another, still living, thread,
    plain decoding of the demo target ran at 28 tok/s against 42-49 (2 cores). So every front
    end runs all of its passes on one owner thread (app/engine/job_queue.py); this says when
    one does not.
    """
    # Process-wide, as llama.cpp's thread teams are.
    global _decoding_thread, _decoding_thread_id, _warned_of_threads  # noqa: PLW0603
    current = threading.current_thread()
    previous, previous_id = _decoding_thread, _decoding_thread_id
    _decoding_thread, _decoding_thread_id = current, threading.get_native_id()
    if previous is None or previous is current or _warned_of_threads:
        return
    if _still_running(previous, previous_id):
        _warned_of_threads = True
        logging.getLogger(__name__ + ".threads").warning(
            "llama.cpp ran a pass on thread %r while thread %r, which ran passes before, "
            "still lives: both threads' CPU workers now compete for the cores (about half speed)",
            current.name,
            previous.name,
        )


def _still_running(thread: threading.Thread, native_id: int) -> bool:
    """Whether `thread` still runs. Python 3.11 reports a thread it did not start (a QThread:
    the window's engine thread) alive for ever, so on Linux the kernel's list of this process's
    threads decides, after a moment's grace: a thread that has just ended stays listed briefly
    after Python's join() or Qt's wait() returned."""
    if not thread.is_alive():
        return False
    task = f"/proc/self/task/{native_id}"
    if not os.path.isdir("/proc/self/task"):
        return True
    deadline = time.monotonic() + _THREAD_EXIT_GRACE_S
    while os.path.exists(task):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.001)
    return False


def send_output_to_log(log_path: str) -> None:
    """Point this process's stdout and stderr at the log file `log_path`, for a child process
    that runs llama.cpp: llama.cpp writes its abort message straight to file descriptor 2, and
    the parent reads why its child died from that log (app/engine/crash_log.py)."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def last_llama_error() -> str:
    # llama.cpp logs the specific cause ("error loading model: tensor ... data is not within
    # the file bounds ...") before the generic "failed to load model"; prefer the cause.
    for line in reversed(recent_log_lines):
        marker = "error loading model:"
        if marker in line:
            return line.split(marker, 1)[1].strip()
    for line in reversed(recent_log_lines):
        lowered = line.lower()
        if "error" in lowered or "failed" in lowered or "invalid" in lowered:
            return line.split(": ", 1)[-1].strip()
    return "llama.cpp refused the file"


@functools.cache  # the CPU does not change under a running process; every load asks
def extra_buffers_safe(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether llama.cpp may put weights in its extra CPU buffers (repacked layouts, Intel AMX).

    Not on a CPU with AMX: llama.cpp's AMX matrix multiply crashes the process on the first
    pass over quantized weights there (llama.cpp#20824, seen on Sapphire Rapids virtual
    machines), and a crash cannot be caught. Plain CPU buffers are slower on some quantized
    types, never wrong. (On such a VM, llama-bench with `--repack 1` runs one-token passes,
    which take AMX buffers' vector path, at about twice the speed, and segfaults at the first
    batch of 64, in `ldtilecfg`: only the tile path crashes, but every prompt takes it.)"""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            flags = next((line for line in handle if line.startswith("flags")), "")
    except OSError:
        return True
    return "amx_int8" not in flags.split()


def one_token_buffers(
    one_token_passes: bool, on_host: bool, cpuinfo: str = "/proc/cpuinfo"
) -> bool:
    """Whether a model held in host memory that decodes a token a pass (a draft model) should
    get llama.cpp's extra CPU buffers where they are otherwise unsafe (a CPU with AMX), and
    read in one-token passes too. AMX buffers multiply one row with their vector kernels and
    two or more with the tile kernels that crash (extra_buffers_safe), so passes of one token
    never crash. On an AMX Xeon VM, the demo's Q4_1 draft ran a pass in 4.7 ms against 11.3
    on plain buffers, and read 200 tokens one at a time in 0.70 s against 0.63 s in batches."""
    return one_token_passes and on_host and not extra_buffers_safe(cpuinfo)
