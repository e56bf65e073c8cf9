"""Making a llama.cpp grammar sampler, with its parser's complaint in words.

llama.cpp's GBNF parser writes its error, and the whole grammar after it, straight to the
process's stderr (fprintf in llama-grammar.cpp); its later checks (an undefined rule, no root,
left recursion) go to its log; the caller gets only a NULL sampler. A request's grammar is the
client's text: a server's terminal would show every bad one in full, and the client would learn
nothing. So while the sampler is made, fd 2 goes to a temporary file (a file, not a pipe: a
grammar longer than a pipe's buffer would block the parser's own write). The parser's line
becomes the error's reason; whatever else was written meanwhile (another thread's output) goes
back to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from typing import Any

from app.errors import SettingValueError
from app.llama.backend import recent_log_lines

_MARKER = "error parsing grammar: "
_stderr_lock = threading.Lock()
# The parser's reason often ends with the rest of the grammar from where it stopped.
_REASON_CHARS = 120


def grammar_sampler(llama_cpp: Any, vocab: Any, gbnf: str, root: str) -> Any:
    """llama_sampler_init_grammar's sampler; SettingValueError("constraint") saying why not."""
    if "\0" in gbnf or "\0" in root:
        # C reads the text to its first NUL: the grammar would be cut short, unseen.
        raise SettingValueError("constraint", "a grammar cannot hold a NUL character")
    with _stderr_lock:
        recent_log_lines.clear()
        sampler, written = _writing_stderr_aside(
            lambda: llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), root.encode())
        )
    reason, rest = _parse_error(written.decode("utf-8", "replace"), gbnf)
    _write_back(rest)
    if sampler:
        return sampler
    if reason is None:
        complaints = [line for line in recent_log_lines if line != "failed to parse grammar"]
        reason = complaints[-1] if complaints else None
    message = "llama.cpp could not parse the grammar" + (f": {reason}" if reason else "")
    raise SettingValueError("constraint", message)


def _parse_error(text: str, gbnf: str) -> tuple[str | None, str]:
    """The parser's reason in `text` (None if it wrote none), and the text without its lines:
    "<function>: error parsing grammar: <reason>\\n\\n<the grammar>\\n"."""
    at = text.find(_MARKER)
    end = text.find(f"\n\n{gbnf}\n", at) if at >= 0 else -1
    if end < 0:
        return None, text
    reason = " ".join(text[at + len(_MARKER) : end].split())
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1] + "…"
    start = text.rfind("\n", 0, at) + 1
    return reason, text[:start] + text[end + len(gbnf) + 3 :]


def _writing_stderr_aside(call: Any) -> tuple[Any, bytes]:
    """call()'s result and what was written to fd 2 while it ran (fd 2 is the process's: two
    of these at once would each restore the other's file, hence the caller's lock)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    try:
        # Opened apart from its `with`: a failure here leaves llama.cpp writing as it will.
        aside = tempfile.TemporaryFile()  # noqa: SIM115
    except OSError:
        return call(), b""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to set aside (a windowed app)
        aside.close()
        return call(), b""
    with aside:
        try:
            os.dup2(aside.fileno(), 2)
            try:
                result = call()
            finally:
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    sys.stderr.flush()
                os.dup2(saved, 2)
        finally:
            os.close(saved)
        aside.seek(0)
        return result, aside.read()


def _write_back(text: str) -> None:
    """Back to fd 2, where it was going (in a contained child, the log, not sys.stderr)."""
    if text.strip():
        with contextlib.suppress(OSError):
            os.write(2, text.encode("utf-8", "replace"))
