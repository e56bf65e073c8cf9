"""Load an unknown model file once in a child process, so a file that crashes llama.cpp cannot
take the app down with it.

Some files pass every header rule and still make llama.cpp abort the whole process (a vocabulary
with two identical token texts, for one). `ensure_loadable(path)` is what the composition roots
call before loading a file: it vets the header (`inspect_gguf`, `GGUFInfo.problem`), then, for a
file it has not seen before, loads it once in a child Python process (vocabulary and weights, CPU
only, a tiny context, one decoded token) and remembers the verdict by file identity (real path,
size, mtime_ns, inode) in the data folder. A file that failed stays refused without another try
until it changes on disk, so a remembered target that crashed is never auto-loaded again. A
verdict costs one `stat` and one small JSON read once cached.

The child is `python -m models.probe PATH` (PATH absolute: the child runs in the code's folder);
it prints one JSON line, {"ok": true} or {"ok": false, "reason": "..."}, with "lasting": false
when the file was missing or unreadable from the child, which is no verdict on the file itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from app.durable import replace_atomically
from app.errors import NO_SUCH_FILE, ModelLoadError
from app.paths import DataFolderError, data_dir

__all__ = [
    "CHECKS_FILE",
    "PROBE_TIMEOUT_S",
    "ProbeVerdict",
    "ensure_loadable",
    "file_identity",
    "probe_file",
    "remembered_failure",
]

CHECKS_FILE = "model-checks.json"
PROBE_TIMEOUT_S = 300.0  # first touch of a large model's weights reads the whole file
_PROBE_CTX = 32
_KEPT_CHECKS = 512
_lock = threading.Lock()


def file_identity(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"


def _checks_path() -> Path | None:
    """Where verdicts are remembered; None when the data folder cannot be used, which only
    costs a check again next time."""
    try:
        return data_dir() / CHECKS_FILE
    except DataFolderError:
        return None


# The checks as last read, keyed by the file's stamp: a scan asks once per model file, and
# parsing 512 verdicts each time made listing a big folder read the same JSON hundreds of times.
_checks_as_read: dict[tuple[str, int, int, int], dict[str, dict[str, object]]] = {}


def _load_checks() -> dict[str, dict[str, object]]:
    """The remembered verdicts; callers hold `_lock` and must not change what they get."""
    path = _checks_path()
    if path is None:
        return {}
    try:
        st = path.stat()
        stamp = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp in _checks_as_read:
            return _checks_as_read[stamp]
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    checks = data if isinstance(data, dict) else {}
    _checks_as_read.clear()
    _checks_as_read[stamp] = checks
    return checks


def _save_check(identity: str, ok: bool, reason: str) -> None:
    checks = dict(_load_checks())
    checks.pop(identity, None)
    checks[identity] = {"ok": ok, "reason": reason}
    for stale in list(checks)[:-_KEPT_CHECKS]:  # oldest first: files long replaced or deleted
        del checks[stale]
    target = _checks_path()
    if target is None:
        return
    text = json.dumps(checks, indent=1)

    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)

    # An unwritable data folder only costs a check again next time.
    with contextlib.suppress(OSError):
        replace_atomically(target, write)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class ProbeVerdict:
    ok: bool
    reason: str  # "loads", or why not in words
    lasting: bool = True  # False when the check itself could not finish: never remembered


def probe_file(path: Path, *, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeVerdict:
    """Load `path` in a child process and say whether llama.cpp could."""
    # The child runs in the code's folder: a relative path would name another file there.
    path = Path(path).expanduser().absolute()
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["GGML_NO_BACKTRACE"] = "1"  # an abort would otherwise attach a debugger for seconds
    try:
        done = subprocess.run(
            _child_command(str(path)),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=env,
            cwd=root,
            check=False,
        )
    except subprocess.TimeoutExpired:
        reason = f"llama.cpp did not finish loading it within {timeout_s:.0f} s"
        return ProbeVerdict(False, reason, lasting=False)
    except OSError as exc:
        reason = f"the load check could not start ({exc.strerror or exc})"
        return ProbeVerdict(False, reason, lasting=False)
    if done.returncode < 0:
        return ProbeVerdict(
            False, f"llama.cpp crashed loading it ({_signal_name(-done.returncode)})"
        )
    for line in reversed(done.stdout.splitlines()):
        try:
            verdict = json.loads(line)
        except ValueError:
            continue
        if isinstance(verdict, dict) and "ok" in verdict:
            return ProbeVerdict(
                bool(verdict["ok"]),
                str(verdict.get("reason") or "loads"),
                lasting=verdict.get("lasting", True) is not False,
            )
    reason = f"the load check ended without a verdict (exit status {done.returncode})"
    return ProbeVerdict(False, reason, lasting=False)


def _remembered(entry: object) -> tuple[bool, str] | None:
    """A cached verdict as (ok, reason), or None when there is none worth trusting."""
    if not isinstance(entry, dict) or "ok" not in entry:
        return None
    ok, reason = bool(entry["ok"]), str(entry.get("reason", ""))
    if not ok and reason == NO_SUCH_FILE:
        # Asked only about a file that is there (its identity was just read): this verdict is
        # about another path, as older versions wrote when their check's child looked for a
        # relative path in another folder; trusted, it would refuse a good file for ever.
        return None
    return ok, reason


def remembered_failure(path: Path) -> str | None:
    """Why llama.cpp failed to load this very file when it was last tried, if it did; what
    `models list` and `inspect` add to the header's verdict."""
    try:
        identity = file_identity(path)
    except OSError:
        return None
    with _lock:
        remembered = _remembered(_load_checks().get(identity))
    if remembered is None or remembered[0]:
        return None
    return f"llama.cpp could not load it: {remembered[1]}"


def ensure_loadable(path: str | os.PathLike[str]) -> None:
    """Raise ModelLoadError unless the file's header is sound and llama.cpp loads it.

    Import-light and quick on a file seen before; the first sight of a file costs one load in a
    child process.
    """
    from app.llama.facts import precheck_model_file  # noqa: PLC0415
    from models.gguf import inspect_gguf  # noqa: PLC0415 - gguf loads only when needed

    p = Path(path).expanduser()
    precheck_model_file(p)  # the loader's own first checks, in its words
    info = inspect_gguf(p)
    if info.problem is not None:
        raise ModelLoadError(str(p), info.problem)
    try:
        identity = file_identity(p)
    except OSError as exc:
        raise ModelLoadError(str(p), exc.strerror or "cannot read it") from None
    with _lock:
        remembered = _remembered(_load_checks().get(identity))
    if remembered is not None:
        ok, reason = remembered
        if not ok:
            raise ModelLoadError(str(p), f"{reason} (found by an earlier check)")
        return
    verdict = probe_file(p)
    if verdict.lasting:
        with _lock:
            _save_check(identity, verdict.ok, verdict.reason)
    if not verdict.ok:
        raise ModelLoadError(str(p), verdict.reason)


PROBE_FLAG = "--probe-model-file"
"""Hidden first argument of a frozen specchat that makes it run the probe child (app/cli)."""


def _child_command(path: str) -> list[str]:
    # A frozen bundle has no `python -m`: its executable runs the probe when given PROBE_FLAG.
    if getattr(sys, "frozen", False):
        return [sys.executable, PROBE_FLAG, path]
    return [sys.executable, "-m", "models.probe", path]


def probe_child(path: str) -> int:
    """The probe itself: load, tokenize, decode one token; one JSON verdict line on stdout."""
    from app.llama.facts import precheck_model_file  # noqa: PLC0415

    try:
        precheck_model_file(Path(path))
    except ModelLoadError as exc:
        # The parent read this file a moment ago: missing or unreadable here is about this
        # moment (it was replaced, or this path names another file), not about the file.
        print(json.dumps({"ok": False, "reason": exc.reason, "lasting": False}), flush=True)
        return 0
    from app.llama.config import ModelConfig  # noqa: PLC0415
    from app.llama.model import LlamaModel  # noqa: PLC0415

    try:
        with LlamaModel(ModelConfig(path, n_ctx=_PROBE_CTX, n_gpu_layers=0, n_threads=1)) as model:
            tokens = model.tokenize("Hello", add_special=True)[:2] or [0]
            model.feed(tokens, 1)
    except ModelLoadError as exc:
        print(json.dumps({"ok": False, "reason": exc.reason}), flush=True)
        return 0
    except Exception as exc:  # any other failure is also a verdict, not a crash of the parent
        print(json.dumps({"ok": False, "reason": f"llama.cpp failed on it ({exc})"}), flush=True)
        return 0
    print(json.dumps({"ok": True, "reason": "loads"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(probe_child(sys.argv[1]))
